package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"clouddb"
)

// `clouddb admin …` works on the store directly, also while the service runs: SQLite in
// WAL mode takes writers from several processes, and PostgreSQL any number.

// keyCacheTTL is how long a running service may still accept a key after it is deleted
// from the store: the cloud API caches a looked-up key for 2s (authTTL in cloudapi), and
// a lookup in flight when the key was deleted may cache it a moment later.
const keyCacheTTL = 2*time.Second + 500*time.Millisecond

// adminAccount is an account as `admin accounts list -o json` prints it.
type adminAccount struct {
	ID               int       `json:"id"`
	Name             string    `json:"name"`
	Plan             string    `json:"plan"`
	CreatedTimestamp time.Time `json:"createdTimestamp"`
}

var adminAccountColumns = columns[adminAccount]{
	head: []string{"ID", "NAME", "PLAN", "CREATED"},
	row: func(a *adminAccount) []string {
		return []string{strconv.Itoa(a.ID), a.Name, a.Plan, a.CreatedTimestamp.Local().Format(time.DateTime)}
	},
}

// adminKey is an API key as `admin keys list -o json` prints it: its secret is not
// stored, only its digest, which is not shown either.
type adminKey struct {
	ID               int       `json:"id"`
	AccountID        int       `json:"accountId"`
	Name             string    `json:"name"`
	Key              string    `json:"key"`
	Role             string    `json:"role"`
	CreatedTimestamp time.Time `json:"createdTimestamp"`
}

var adminKeyColumns = columns[adminKey]{
	head: []string{"ID", "ACCOUNT", "NAME", "KEY", "ROLE", "CREATED"},
	row: func(k *adminKey) []string {
		return []string{strconv.Itoa(k.ID), strconv.Itoa(k.AccountID), k.Name, k.Key, k.Role, k.CreatedTimestamp.Local().Format(time.DateTime)}
	},
}

// listResult renders values as a list result of the columns t.
func listResult[T any](t columns[T], values []T) (*result, error) {
	items := make([]json.RawMessage, 0, len(values))
	for _, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		items = append(items, b)
	}
	raw, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	return t.list(raw, items)
}

// structured says whether the output is JSON (-o json or --field) rather than text.
func (c *CLI) structured() bool { return c.flags.output == "json" || c.flags.field != "" }

// printJSON prints v as -o json and --field do.
func (c *CLI) printJSON(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.print(&result{raw: raw})
}

func (c *CLI) adminCommand() *cobra.Command {
	var store string
	accounts := group("accounts", "List and create accounts",
		c.adminAccountsListCommand(&store), c.adminAccountsCreateCommand(&store))
	keys := group("keys", "List, create and revoke API keys",
		c.adminKeysListCommand(&store), c.adminKeysCreateCommand(&store), c.adminKeysRevokeCommand(&store))
	cmd := group("admin", "Work on the service's store directly: accounts and API keys", accounts, keys)
	cmd.Long = `Work on the service's store directly (also while clouddb serve runs): accounts and API
keys. --data-dir and --store name the store as they do for clouddb serve; a shared
(PostgreSQL) store needs CLOUDDB_ENCRYPTION_KEY as the service has it.`
	cmd.PersistentFlags().StringVar(&store, "store", "", "sqlite (a file in the data dir) or the postgres:// URL of the service's store (env CLOUDDB_STORE)")
	envFlag(cmd.PersistentFlags(), "store", "CLOUDDB_STORE")
	return cmd
}

// withStore runs fn in a write transaction of the store the flags name.
func (c *CLI) withStore(ctx context.Context, store string, fn func(tx clouddb.Tx) error) error {
	if err := validateStore(store); err != nil {
		return usageError{err}
	}
	if c.flags.dataDir == "" {
		return usagef("--data-dir must not be empty")
	}
	key, err := lookupEncryptionKey(c.LookupEnv)
	if err != nil {
		return err
	}
	db, _, err := openState(ctx, Config{DataDir: c.flags.dataDir, Store: store, EncryptionKey: key}, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(ctx, fn)
}

func (c *CLI) adminAccountsListCommand(store *string) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List every account",
		Example: "  clouddb admin accounts list",
		Args:    noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			var list []adminAccount
			err := c.withStore(cmd.Context(), *store, func(tx clouddb.Tx) error {
				accounts, err := tx.Accounts(cmd.Context())
				for _, a := range accounts {
					list = append(list, adminAccount{ID: a.ID, Name: a.Name, Plan: string(a.Plan), CreatedTimestamp: a.CreatedAt})
				}
				return err
			})
			if err != nil {
				return err
			}
			r, err := listResult(adminAccountColumns, list)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
}

func (c *CLI) adminAccountsCreateCommand(store *string) *cobra.Command {
	var name, plan string
	cmd := &cobra.Command{
		Use:   "create --name NAME [--plan PLAN]",
		Short: "Create an account with a payment method",
		Long: `Create an account with a payment method. It prints "account ID created (…)", or with
-o json {"id", "name", "plan", "createdTimestamp"}.`,
		Example: "  clouddb admin accounts create --name team-a --plan annual",
		Args:    noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usagef("--name is required")
			}
			if !clouddb.Plan(plan).Valid() {
				return usagef("--plan %q: want flexible, annual, fixed or free", plan)
			}
			ctx := cmd.Context()
			return c.withStore(ctx, *store, func(tx clouddb.Tx) error {
				if err := ensureInternalCloudAccount(ctx, tx); err != nil {
					return err
				}
				a, err := createAccount(ctx, tx, name, clouddb.Plan(plan))
				if err != nil {
					return err
				}
				if c.structured() {
					return c.printJSON(adminAccount{ID: a.ID, Name: a.Name, Plan: string(a.Plan), CreatedTimestamp: a.CreatedAt})
				}
				fmt.Fprintf(c.Stdout, "account %d created (name %q, plan %s)\n", a.ID, a.Name, a.Plan)
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "account name (required)")
	cmd.Flags().StringVar(&plan, "plan", string(clouddb.PlanFlexible), "flexible, annual (both may use the API), fixed or free")
	return cmd
}

func (c *CLI) adminKeysListCommand(store *string) *cobra.Command {
	var account int
	cmd := &cobra.Command{
		Use:     "list [--account ID]",
		Short:   "List API keys (never their secrets, which are not stored)",
		Example: "  clouddb admin keys list --account 2",
		Args:    noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			if account < 0 {
				return usagef("--account %d: want an account id", account)
			}
			var list []adminKey
			err := c.withStore(cmd.Context(), *store, func(tx clouddb.Tx) error {
				keys, err := tx.APIKeys(cmd.Context(), account)
				for _, k := range keys {
					list = append(list, adminKey{ID: k.ID, AccountID: k.AccountID, Name: k.Name, Key: k.Key, Role: string(k.Role), CreatedTimestamp: k.CreatedAt})
				}
				return err
			})
			if err != nil {
				return err
			}
			r, err := listResult(adminKeyColumns, list)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
	cmd.Flags().IntVar(&account, "account", 0, "list only this account's keys (default: every account's)")
	return cmd
}

func (c *CLI) adminKeysCreateCommand(store *string) *cobra.Command {
	var (
		account    int
		name, role string
	)
	cmd := &cobra.Command{
		Use:   "create --account ID [--name NAME] [--role owner|viewer]",
		Short: "Create an API key pair; its secret is shown once",
		Long: `Create an API key pair; its secret is shown once (the store keeps a digest). It prints
the x-api-key and x-api-secret-key lines, or with -o json {"accountId", "apiKey",
"secretKey"}, as credentials.json holds them.`,
		Example: `  clouddb admin keys create --account 2 --name ci
  clouddb admin keys create --account 2 --role viewer`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			if account <= 0 {
				return usagef("--account is required (an account id)")
			}
			if r := clouddb.APIKeyRole(role); r != clouddb.RoleOwner && r != clouddb.RoleViewer {
				return usagef("--role %q: want owner or viewer", role)
			}
			ctx := cmd.Context()
			return c.withStore(ctx, *store, func(tx clouddb.Tx) error {
				if _, err := tx.Account(ctx, account); errors.Is(err, clouddb.ErrNotFound) {
					return fmt.Errorf("account %d does not exist", account)
				} else if err != nil {
					return err
				}
				k, secret, err := createKey(ctx, tx, account, name, clouddb.APIKeyRole(role), "", "")
				if err != nil {
					return err
				}
				if c.structured() {
					// The names of credentials.json.
					return c.printJSON(credentials{AccountID: k.AccountID, APIKey: k.Key, SecretKey: secret})
				}
				fmt.Fprintf(c.Stdout, "x-api-key: %s\nx-api-secret-key: %s\n", k.Key, secret)
				return nil
			})
		}),
	}
	cmd.Flags().IntVar(&account, "account", 0, "account id (required)")
	cmd.Flags().StringVar(&name, "name", "api-key", "key name")
	cmd.Flags().StringVar(&role, "role", string(clouddb.RoleOwner), "owner (read and write) or viewer (read only)")
	return cmd
}

func (c *CLI) adminKeysRevokeCommand(store *string) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke KEY",
		Short: "Revoke an API key: it stops authenticating",
		Long: `Revoke an API key (its x-api-key, as admin keys list shows it): it is deleted from the
store. A running clouddb serve caches a key it looked up for 2 seconds, so the command
returns once that time has passed: from then on the key is refused. It prints "API key
KEY revoked", or with -o json {"key", "revoked": true}.`,
		Example: "  clouddb admin keys revoke 2B4UDDKZ…",
		Args:    oneArg("key (its x-api-key)"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			key := args[0]
			err := c.withStore(cmd.Context(), *store, func(tx clouddb.Tx) error {
				return tx.DeleteAPIKey(cmd.Context(), key)
			})
			if errors.Is(err, clouddb.ErrNotFound) {
				return fmt.Errorf("no API key %q", key)
			} else if err != nil {
				return err
			}
			wait := c.KeyCacheTTL
			if wait == 0 {
				wait = keyCacheTTL
			}
			if !c.flags.quiet {
				fmt.Fprintf(c.Stderr, "key deleted; waiting %s for running services to forget it\n", wait)
			}
			if err := pause(cmd.Context(), wait); err != nil {
				return err
			}
			if c.structured() {
				return c.printJSON(struct {
					Key     string `json:"key"`
					Revoked bool   `json:"revoked"`
				}{key, true})
			}
			fmt.Fprintf(c.Stdout, "API key %s revoked\n", key)
			return nil
		}),
	}
}
