package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"clouddb/cloudapi/client"
)

var databaseColumns = columns[client.Database]{
	idKey: "databaseId",
	head:  []string{"ID", "NAME", "STATUS", "ENDPOINT", "MEMORY_GB", "REPLICATION", "TLS", "REDIS"},
	row: func(d *client.Database) []string {
		tls := false
		if d.Security != nil && d.Security.EnableTLS != nil {
			tls = *d.Security.EnableTLS
		}
		return []string{strconv.Itoa(d.ID), d.Name, d.Status, d.PublicEndpoint, gb(d.MemoryLimitInGB), yesNo(d.Replication), yesNo(tls), d.RedisVersion}
	},
}

func databasePath(sub, id int) string { return fmt.Sprintf("/subscriptions/%d/databases/%d", sub, id) }

func (c *CLI) databasesCommand() *cobra.Command {
	cmd := group("databases", "List, read, create, change and delete the databases of a subscription",
		c.databasesListCommand(), c.databasesGetCommand(), c.databasesCreateCommand(),
		c.databasesUpdateCommand(), c.databasesDeleteCommand())
	cmd.Aliases = []string{"database", "db", "dbs"}
	return cmd
}

// subscriptionFlag adds the --subscription every database command needs.
func subscriptionFlag(cmd *cobra.Command, sub *int) {
	cmd.Flags().IntVar(sub, "subscription", 0, "subscription id (required)")
}

func needSubscription(sub int) error {
	if sub <= 0 {
		return usagef("--subscription is required (a subscription id)")
	}
	return nil
}

func (c *CLI) databasesListCommand() *cobra.Command {
	var sub, limit, offset int
	cmd := &cobra.Command{
		Use:   "list --subscription ID",
		Short: "List a subscription's databases",
		Example: `  clouddb databases list --subscription 12
  clouddb databases list --subscription 12 --field publicEndpoint`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			if err := needSubscription(sub); err != nil {
				return err
			}
			if limit < 1 || limit > 100 {
				return usagef("--limit %d: want 1 to 100", limit)
			}
			if offset < 0 {
				return usagef("--offset %d: must not be negative", offset)
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			var items []json.RawMessage
			if cmd.Flags().Changed("limit") || cmd.Flags().Changed("offset") {
				raw, items, err = databasesPage(cmd, api, sub, limit, offset)
			} else {
				raw, items, err = allDatabases(cmd, api, sub)
			}
			if err != nil {
				return err
			}
			r, err := databaseColumns.list(raw, items)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
	subscriptionFlag(cmd, &sub)
	cmd.Flags().IntVar(&limit, "limit", 100, "read one page of at most this many databases (1 to 100; default: every database, page after page)")
	cmd.Flags().IntVar(&offset, "offset", 0, "read one page that skips this many databases")
	return cmd
}

// databasesPage reads one page of a subscription's databases: the API's answer and its
// databases.
func databasesPage(cmd *cobra.Command, api *client.Client, sub, limit, offset int) (json.RawMessage, []json.RawMessage, error) {
	raw, err := getRaw(cmd, api, fmt.Sprintf("/subscriptions/%d/databases?limit=%d&offset=%d", sub, limit, offset))
	if err != nil {
		return nil, nil, err
	}
	items, err := elements(raw, "subscription", "0", "databases")
	return raw, items, err
}

// allDatabases reads every database of a subscription, page after page of 100 (the API's
// largest), until numberOfDatabases are read or a page is short; the answer is the first
// page's with every database in it, as one page holding them all would be.
func allDatabases(cmd *cobra.Command, api *client.Client, sub int) (json.RawMessage, []json.RawMessage, error) {
	const page = 100
	first, all, err := databasesPage(cmd, api, sub, page, 0)
	if err != nil {
		return nil, nil, err
	}
	var envelope map[string]json.RawMessage
	var entries []map[string]json.RawMessage
	if err = json.Unmarshal(first, &envelope); err != nil {
		return nil, nil, fmt.Errorf("decode the answer: %w", err)
	}
	if err = json.Unmarshal(envelope["subscription"], &entries); err != nil || len(entries) != 1 {
		return nil, nil, fmt.Errorf("list the databases of subscription %d: the answer does not hold just that subscription", sub)
	}
	var total int
	if n, ok := entries[0]["numberOfDatabases"]; !ok || json.Unmarshal(n, &total) != nil {
		total = -1 // unknown: read until a short page
	}
	for n := len(all); n == page && (total < 0 || len(all) < total); {
		var items []json.RawMessage
		if _, items, err = databasesPage(cmd, api, sub, page, len(all)); err != nil {
			return nil, nil, err
		}
		all = append(all, items...)
		n = len(items)
	}
	if len(all) <= page {
		return first, all, nil
	}
	dbs, err := json.Marshal(all)
	if err != nil {
		return nil, nil, err
	}
	entries[0]["databases"] = dbs
	if envelope["subscription"], err = json.Marshal(entries); err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(envelope)
	return raw, all, err
}

func (c *CLI) databasesGetCommand() *cobra.Command {
	var sub int
	cmd := &cobra.Command{
		Use:   "get --subscription ID DATABASE_ID",
		Short: "Read a database",
		Example: `  clouddb databases get --subscription 12 34
  clouddb databases get --subscription 12 34 --field security.password`,
		Args: oneArg("database ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if err := needSubscription(sub); err != nil {
				return err
			}
			id, err := idArg("database ID", args[0])
			if err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := getRaw(cmd, api, databasePath(sub, id))
			if err != nil {
				return err
			}
			r, err := databaseColumns.one(raw)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
	subscriptionFlag(cmd, &sub)
	return cmd
}

// settleDatabase waits until the database is active, then its subscription (which a
// change of its databases makes pending), and returns the database.
func (c *CLI) settleDatabase(api *client.Client, sub int, id func(done *client.Task) int) settleFunc {
	return func(ctx context.Context, p *progress, done *client.Task) (*result, error) {
		db := id(done)
		raw, err := c.settle(ctx, p, fmt.Sprintf("database %d", db), client.DatabaseActive, rawAt(api, databasePath(sub, db)))
		if err != nil {
			return nil, err
		}
		if _, err := c.settle(ctx, p, fmt.Sprintf("subscription %d", sub), client.SubscriptionActive, rawAt(api, subscriptionPath(sub))); err != nil {
			return nil, err
		}
		return databaseColumns.one(raw)
	}
}

// databaseSettings are the flags a create and an update share.
type databaseSettings struct {
	name, password, persistence, eviction string
	memory                                float64
	replication, tls                      bool
	sourceIPs                             []string
}

func (s *databaseSettings) flags(f *pflag.FlagSet, create bool) {
	if create {
		f.StringVar(&s.name, "name", "", "database name: letters, digits and hyphens (required)")
		f.Float64Var(&s.memory, "memory-gb", 1, "memory limit in GB")
		f.StringVar(&s.password, "password", "", "password of the default user (default: a random one; read it back with --field security.password)")
	} else {
		f.StringVar(&s.name, "name", "", "new name")
		f.Float64Var(&s.memory, "memory-gb", 0, "new memory limit in GB")
		f.StringVar(&s.password, "password", "", "new password of the default user")
	}
	f.BoolVar(&s.replication, "replication", false, "keep a replica of the database (--replication=false turns it off)")
	f.BoolVar(&s.tls, "tls", false, "require TLS (--tls=false turns it off)")
	f.StringVar(&s.persistence, "persistence", "", "data persistence: none, aof-every-1-second, aof-every-write, snapshot-every-1-hour, snapshot-every-6-hours, snapshot-every-12-hours")
	f.StringVar(&s.eviction, "eviction-policy", "", "eviction policy, e.g. allkeys-lru, volatile-lru, noeviction")
	f.StringSliceVar(&s.sourceIPs, "source-ip", nil, "CIDR allowed to connect (repeatable; default: any)")
}

// given returns a pointer to v when the flag was given.
func given[T any](f *pflag.FlagSet, name string, v T) *T {
	if !f.Changed(name) {
		return nil
	}
	return &v
}

func (c *CLI) databasesCreateCommand() *cobra.Command {
	var (
		wait         bool
		sub, port    int
		redisVersion string
		s            databaseSettings
	)
	cmd := &cobra.Command{
		Use:   "create --subscription ID --name NAME",
		Short: "Create a database in a subscription",
		Example: `  clouddb databases create --subscription 12 --name cache --memory-gb 0.5 --wait
  DB=$(clouddb databases create --subscription 12 --name cache --wait --field id)
  clouddb databases create --subscription 12 --name kept --persistence aof-every-write --replication --tls --wait`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			if err := needSubscription(sub); err != nil {
				return err
			}
			if s.name == "" {
				return usagef("--name is required")
			}
			if s.memory <= 0 {
				return usagef("--memory-gb %g: want a positive size in GB", s.memory)
			}
			f := cmd.Flags()
			if !f.Changed("password") {
				// The API requires a password; 130 random bits.
				s.password = rand.Text()
			}
			req := client.CreateDatabase{
				Name: &s.name, MemoryLimitInGB: &s.memory, Password: &s.password,
				Replication: given(f, "replication", s.replication), EnableTLS: given(f, "tls", s.tls),
				DataPersistence: given(f, "persistence", s.persistence), DataEvictionPolicy: given(f, "eviction-policy", s.eviction),
				RedisVersion: given(f, "redis-version", redisVersion), Port: given(f, "port", port), SourceIP: s.sourceIPs,
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			return c.submit(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
				return api.CreateDatabase(ctx, sub, req)
			}, c.settleDatabase(api, sub, (*client.Task).ResourceID))
		}),
	}
	subscriptionFlag(cmd, &sub)
	s.flags(cmd.Flags(), true)
	cmd.Flags().StringVar(&redisVersion, "redis-version", "", "Redis version (default: the subscription's)")
	cmd.Flags().IntVar(&port, "port", 0, "port of the endpoint (default: the next free one)")
	waitFlag(cmd, &wait, "the database and its subscription until they are active, and print the database")
	return cmd
}

func (c *CLI) databasesUpdateCommand() *cobra.Command {
	var (
		wait bool
		sub  int
		s    databaseSettings
	)
	cmd := &cobra.Command{
		Use:   "update --subscription ID DATABASE_ID",
		Short: "Change a database: memory, password, replication, TLS, persistence, ...",
		Example: `  clouddb databases update --subscription 12 34 --memory-gb 2 --wait
  clouddb databases update --subscription 12 34 --replication=false`,
		Args: oneArg("database ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if err := needSubscription(sub); err != nil {
				return err
			}
			id, err := idArg("database ID", args[0])
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("memory-gb") && s.memory <= 0 {
				return usagef("--memory-gb %g: want a positive size in GB", s.memory)
			}
			req := client.UpdateDatabase{
				Name: given(f, "name", s.name), MemoryLimitInGB: given(f, "memory-gb", s.memory), Password: given(f, "password", s.password),
				Replication: given(f, "replication", s.replication), EnableTLS: given(f, "tls", s.tls),
				DataPersistence: given(f, "persistence", s.persistence), DataEvictionPolicy: given(f, "eviction-policy", s.eviction),
				SourceIP: s.sourceIPs,
			}
			if !anyChanged(f, "name", "memory-gb", "password", "replication", "tls", "persistence", "eviction-policy", "source-ip") {
				return usagef("nothing to change: give --memory-gb, --name, --password, --replication, --tls, --persistence, --eviction-policy or --source-ip")
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			return c.submit(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
				return api.UpdateDatabase(ctx, sub, id, req)
			}, c.settleDatabase(api, sub, func(*client.Task) int { return id }))
		}),
	}
	subscriptionFlag(cmd, &sub)
	s.flags(cmd.Flags(), false)
	waitFlag(cmd, &wait, "the database and its subscription until they are active, and print the database")
	return cmd
}

func anyChanged(f *pflag.FlagSet, names ...string) bool {
	for _, n := range names {
		if f.Changed(n) {
			return true
		}
	}
	return false
}

func (c *CLI) databasesDeleteCommand() *cobra.Command {
	var (
		wait bool
		sub  int
	)
	cmd := &cobra.Command{
		Use:     "delete --subscription ID DATABASE_ID",
		Short:   "Delete a database",
		Example: "  clouddb databases delete --subscription 12 34 --wait",
		Args:    oneArg("database ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if err := needSubscription(sub); err != nil {
				return err
			}
			id, err := idArg("database ID", args[0])
			if err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			return c.submitDelete(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
				return api.DeleteDatabase(ctx, sub, id)
			}, func(ctx context.Context, p *progress, done *client.Task) (*result, error) {
				if _, err := c.settle(ctx, p, fmt.Sprintf("database %d", id), gone, rawAt(api, databasePath(sub, id))); err != nil {
					return nil, err
				}
				if _, err := c.settle(ctx, p, fmt.Sprintf("subscription %d", sub), client.SubscriptionActive, rawAt(api, subscriptionPath(sub))); err != nil {
					return nil, err
				}
				return taskResult(done)
			})
		}),
	}
	subscriptionFlag(cmd, &sub)
	waitFlag(cmd, &wait, "the database until it is gone, and print the task")
	return cmd
}
