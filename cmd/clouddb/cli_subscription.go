package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"clouddb"
	"clouddb/cloudapi/client"
)

var subscriptionColumns = columns[client.Subscription]{
	head: []string{"ID", "NAME", "STATUS", "DATABASES", "PROVIDER", "REGION", "PAYMENT"},
	row: func(s *client.Subscription) []string {
		var provider, region string
		if len(s.CloudDetails) > 0 {
			provider = s.CloudDetails[0].Provider
			if len(s.CloudDetails[0].Regions) > 0 {
				region = s.CloudDetails[0].Regions[0].Region
			}
		}
		payment := s.PaymentMethodType
		if s.PaymentMethodID != 0 {
			payment += " " + strconv.Itoa(s.PaymentMethodID)
		}
		return []string{strconv.Itoa(s.ID), s.Name, s.Status, strconv.Itoa(s.NumberOfDatabases), provider, region, payment}
	},
}

func subscriptionPath(id int) string { return fmt.Sprintf("/subscriptions/%d", id) }

func (c *CLI) subscriptionsCommand() *cobra.Command {
	cmd := group("subscriptions", "List, read, create, change and delete subscriptions",
		c.subscriptionsListCommand(), c.subscriptionsGetCommand(), c.subscriptionsCreateCommand(),
		c.subscriptionsUpdateCommand(), c.subscriptionsDeleteCommand())
	cmd.Aliases = []string{"subscription", "subs"}
	return cmd
}

func (c *CLI) subscriptionsListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the account's subscriptions",
		Example: "  clouddb subscriptions list\n  clouddb subscriptions list --field id",
		Args:    noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := getRaw(cmd, api, "/subscriptions")
			if err != nil {
				return err
			}
			items, err := elements(raw, "subscriptions")
			if err != nil {
				return err
			}
			r, err := subscriptionColumns.list(raw, items)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
}

func (c *CLI) subscriptionsGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get ID",
		Short:   "Read a subscription",
		Example: "  clouddb subscriptions get 12\n  clouddb subscriptions get 12 --field status",
		Args:    oneArg("subscription ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			id, err := idArg("subscription ID", args[0])
			if err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := getRaw(cmd, api, subscriptionPath(id))
			if err != nil {
				return err
			}
			r, err := subscriptionColumns.one(raw)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
}

// settleSubscription waits until the subscription is active and returns it.
func (c *CLI) settleSubscription(api *client.Client, id func(done *client.Task) int) settleFunc {
	return func(ctx context.Context, p *progress, done *client.Task) (*result, error) {
		sub := id(done)
		raw, err := c.settle(ctx, p, fmt.Sprintf("subscription %d", sub), client.SubscriptionActive, rawAt(api, subscriptionPath(sub)))
		if err != nil {
			return nil, err
		}
		return subscriptionColumns.one(raw)
	}
}

// subscriptionGone waits until the subscription is gone and returns the task.
func (c *CLI) subscriptionGone(api *client.Client, sub int) settleFunc {
	return func(ctx context.Context, p *progress, done *client.Task) (*result, error) {
		_, err := c.settle(ctx, p, fmt.Sprintf("subscription %d", sub), gone, rawAt(api, subscriptionPath(sub)))
		if err != nil {
			return nil, err
		}
		return taskResult(done)
	}
}

func (c *CLI) subscriptionsCreateCommand() *cobra.Command {
	var (
		wait                                       bool
		name, provider, region, cidr, redisVersion string
		paymentMethod, cloudAccount                int
		dbName, dbPersistence                      string
		dbMemory                                   float64
		dbReplication                              bool
		dbQuantity                                 int
	)
	cmd := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create a subscription with its creation-plan database(s)",
		Long: `Create a subscription and the database(s) of its creation plan (--db-* flags). Those
databases get generated passwords: read them with
clouddb databases list --subscription ID --field security.password.`,
		Example: `  clouddb subscriptions create --name demo --wait
  SUB=$(clouddb subscriptions create --name demo --db-memory-gb 0.5 --wait --field id)`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usagef("--name is required")
			}
			if dbName == "" {
				dbName = "db"
				if clouddb.ValidateDatabaseName(name+"-db") == nil {
					dbName = name + "-db"
				}
			}
			if dbMemory <= 0 {
				return usagef("--db-memory-gb %g: want a positive size in GB", dbMemory)
			}
			if dbQuantity < 1 {
				return usagef("--db-quantity %d: want 1 or more", dbQuantity)
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			if paymentMethod == 0 {
				pms, err := api.ListPaymentMethods(cmd.Context())
				if err != nil {
					return err
				}
				if len(pms) == 0 {
					return fmt.Errorf("the account has no payment method: give --payment-method")
				}
				paymentMethod = pms[0].ID
			}
			db := client.CreateSubscriptionDatabase{Name: &dbName, MemoryLimitInGB: &dbMemory}
			if cmd.Flags().Changed("db-replication") {
				db.Replication = &dbReplication
			}
			if dbPersistence != "" {
				db.DataPersistence = &dbPersistence
			}
			if dbQuantity > 1 {
				db.Quantity = &dbQuantity
			}
			req := client.CreateSubscription{
				Name:            &name,
				PaymentMethodID: &paymentMethod,
				CloudProviders: []client.CreateCloudProvider{{
					Provider:       &provider,
					CloudAccountID: &cloudAccount,
					Regions:        []client.CreateRegion{{Region: &region, Networking: &client.CreateNetworking{DeploymentCIDR: &cidr}}},
				}},
				Databases: []client.CreateSubscriptionDatabase{db},
			}
			if redisVersion != "" {
				req.RedisVersion = &redisVersion
			}
			return c.submit(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
				return api.CreateSubscription(ctx, req)
			}, c.settleSubscription(api, (*client.Task).ResourceID))
		}),
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "subscription name (required)")
	f.IntVar(&paymentMethod, "payment-method", 0, "payment method id (default: the account's first)")
	f.StringVar(&provider, "provider", "AWS", "cloud provider: AWS or GCP")
	f.IntVar(&cloudAccount, "cloud-account", client.InternalCloudAccountID, "cloud account id (1 is the service's own)")
	f.StringVar(&region, "region", "us-east-1", "region")
	f.StringVar(&cidr, "cidr", "10.0.0.0/24", "deployment CIDR of the region")
	f.StringVar(&redisVersion, "redis-version", "", "Redis version of the databases (default: the service's default)")
	f.StringVar(&dbName, "db-name", "", "name of the creation-plan database (default: NAME-db, or db)")
	f.Float64Var(&dbMemory, "db-memory-gb", 1, "memory limit of the creation-plan database, in GB")
	f.BoolVar(&dbReplication, "db-replication", false, "give the creation-plan database a replica")
	f.StringVar(&dbPersistence, "db-persistence", "", "data persistence: none, aof-every-1-second, aof-every-write, snapshot-every-1-hour, ...")
	f.IntVar(&dbQuantity, "db-quantity", 1, "how many such databases (NAME-db, NAME-db-2, ...)")
	waitFlag(cmd, &wait, "the subscription until it is active, and print it")
	return cmd
}

func (c *CLI) subscriptionsUpdateCommand() *cobra.Command {
	var (
		wait          bool
		name          string
		paymentMethod int
	)
	cmd := &cobra.Command{
		Use:     "update ID",
		Short:   "Change a subscription's name or payment method",
		Example: "  clouddb subscriptions update 12 --name production --wait",
		Args:    oneArg("subscription ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			id, err := idArg("subscription ID", args[0])
			if err != nil {
				return err
			}
			var req client.UpdateSubscription
			if cmd.Flags().Changed("name") {
				req.Name = &name
			}
			if cmd.Flags().Changed("payment-method") {
				req.PaymentMethodID = &paymentMethod
			}
			if req.Name == nil && req.PaymentMethodID == nil {
				return usagef("nothing to change: give --name or --payment-method")
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			return c.submit(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
				return api.UpdateSubscription(ctx, id, req)
			}, c.settleSubscription(api, func(*client.Task) int { return id }))
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "new name")
	cmd.Flags().IntVar(&paymentMethod, "payment-method", 0, "new payment method id")
	waitFlag(cmd, &wait, "the subscription until it is active, and print it")
	return cmd
}

func (c *CLI) subscriptionsDeleteCommand() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:     "delete ID",
		Short:   "Delete a subscription (its databases must be deleted first)",
		Example: "  clouddb subscriptions delete 12 --wait",
		Args:    oneArg("subscription ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			id, err := idArg("subscription ID", args[0])
			if err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			return c.submitDelete(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
				return api.DeleteSubscription(ctx, id)
			}, c.subscriptionGone(api, id))
		}),
	}
	waitFlag(cmd, &wait, "the subscription until it is gone, and print the task")
	return cmd
}
