package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"clouddb"
	"clouddb/postgres"
	"clouddb/sqlite"
)

// isShared reports whether --store names a store several replicas share (PostgreSQL).
func isShared(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// validateStore checks --store without echoing it: a Postgres URL may hold a password.
func validateStore(store string) error {
	if store == "" || store == "sqlite" {
		return nil
	}
	if !isShared(store) {
		return errors.New("--store: want sqlite (the default: a file in the data dir) or a postgres:// URL")
	}
	if _, err := url.Parse(store); err != nil {
		return errors.New("--store: the postgres:// URL does not parse")
	}
	return nil
}

// openState opens the store the configuration names, with its secrets sealed, and returns
// the cipher, which the browser API's store uses too. onChange is called when another
// replica commits to a shared store.
func openState(ctx context.Context, c Config, onChange func()) (clouddb.Store, *clouddb.Cipher, error) {
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, nil, err
	}
	shared := isShared(c.Store)
	// Every replica of a shared store must seal with the same key, so none makes one up.
	cipher, err := loadCipher(c.DataDir, c.EncryptionKey, !shared)
	if err != nil {
		return nil, nil, err
	}
	var db clouddb.Store
	if shared {
		opts := []postgres.Option{postgres.WithCipher(cipher)}
		if onChange != nil {
			opts = append(opts, postgres.WithChangeHook(onChange))
		}
		db, err = postgres.Open(ctx, c.Store, opts...)
	} else {
		db, err = sqlite.Open(filepath.Join(c.DataDir, "clouddb.db"), sqlite.WithCipher(cipher))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	if err := checkKey(ctx, db, cipher); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, cipher, nil
}

// keyCheck names the setting that holds a value sealed with the store's key.
const keyCheck = "encryption-key-check"

// checkKey makes sure that c is the key the store's secrets are sealed with, so that a
// wrong key stops the start with a clear message instead of failing requests later: the
// first start seals a known value into the store; every start opens it. Replicas that
// share a store and were given different keys are caught even before any secret exists.
func checkKey(ctx context.Context, db clouddb.Store, c *clouddb.Cipher) error {
	const known = "clouddb"
	err := db.Update(ctx, func(tx clouddb.Tx) error {
		sealed, err := tx.Setting(ctx, keyCheck)
		if errors.Is(err, clouddb.ErrNotFound) {
			// A store from before the check: its secrets, if any, must open.
			if oerr := openSecrets(ctx, tx); oerr != nil {
				return oerr
			}
			return tx.PutSetting(ctx, keyCheck, c.Seal(known))
		} else if err != nil {
			return err
		}
		if plain, err := c.Open(sealed); err != nil || plain != known {
			return clouddb.ErrSealed
		}
		return nil
	})
	if errors.Is(err, clouddb.ErrSealed) {
		return fmt.Errorf("the encryption key does not open the secrets in the store: start with the key they were sealed with (%s or %s)", envKey, keyFile)
	}
	return err
}

// openSecrets reads every sealed secret once.
func openSecrets(ctx context.Context, tx clouddb.Tx) error {
	if _, _, err := tx.Databases(ctx, clouddb.DatabaseFilter{}); err != nil {
		return err
	}
	_, err := tx.CloudAccounts(ctx, clouddb.CloudAccountFilter{})
	return err
}
