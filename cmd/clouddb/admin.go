package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"clouddb"
)

// runAdmin runs `clouddb admin …`, which works on the store directly (also while the
// service runs: SQLite in WAL mode takes writers from several processes, and PostgreSQL
// any number).
func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: clouddb admin accounts create … | clouddb admin keys create …")
	}
	fs := flag.NewFlagSet("clouddb admin "+args[0]+" "+args[1], flag.ContinueOnError)
	fs.SetOutput(stderr)
	key, err := envEncryptionKey()
	if err != nil {
		return err
	}
	c := Config{DataDir: DefaultDataDir, EncryptionKey: key}
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of the state")
	fs.StringVar(&c.Store, "store", c.Store, "sqlite (a file in the data dir) or the postgres:// URL of the service's store")
	switch args[0] + " " + args[1] {
	case "accounts create":
		name := fs.String("name", "", "account name (required)")
		plan := fs.String("plan", string(clouddb.PlanFlexible), "flexible, annual, fixed or free")
		if err := envFlags(fs, args[2:]); err != nil {
			return err
		}
		if *name == "" {
			return errors.New("--name is required")
		}
		if !clouddb.Plan(*plan).Valid() {
			return fmt.Errorf("--plan %q: want flexible, annual, fixed or free", *plan)
		}
		return withStore(ctx, c, func(tx clouddb.Tx) error {
			if err := ensureInternalCloudAccount(ctx, tx); err != nil {
				return err
			}
			a, err := createAccount(ctx, tx, *name, clouddb.Plan(*plan))
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "account %d created (name %q, plan %s)\n", a.ID, a.Name, a.Plan)
			return nil
		})
	case "keys create":
		account := fs.Int("account", 0, "account id (required)")
		name := fs.String("name", "api-key", "key name")
		role := fs.String("role", string(clouddb.RoleOwner), "owner (read and write) or viewer (read only)")
		if err := envFlags(fs, args[2:]); err != nil {
			return err
		}
		if *account <= 0 {
			return errors.New("--account is required")
		}
		if r := clouddb.APIKeyRole(*role); r != clouddb.RoleOwner && r != clouddb.RoleViewer {
			return fmt.Errorf("--role %q: want owner or viewer", *role)
		}
		return withStore(ctx, c, func(tx clouddb.Tx) error {
			if _, err := tx.Account(ctx, *account); errors.Is(err, clouddb.ErrNotFound) {
				return fmt.Errorf("account %d does not exist", *account)
			} else if err != nil {
				return err
			}
			k, secret, err := createKey(ctx, tx, *account, *name, clouddb.APIKeyRole(*role), "", "")
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "x-api-key: %s\nx-api-secret-key: %s\n", k.Key, secret)
			return nil
		})
	}
	return fmt.Errorf("unknown admin command %q", args[0]+" "+args[1])
}

func withStore(ctx context.Context, c Config, fn func(tx clouddb.Tx) error) error {
	if err := validateStore(c.Store); err != nil {
		return err
	}
	db, _, err := openState(ctx, c, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(ctx, fn)
}
