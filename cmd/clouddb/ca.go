package main

import (
	"context"
	"errors"
	"fmt"

	"clouddb"
	"clouddb/internal/pki"
)

// Settings that hold the installation's CA: its certificate, and its private key sealed
// with the store's key like every other secret.
const (
	caCertSetting = "tls-ca-certificate"
	caKeySetting  = "tls-ca-key"
)

// loadCA returns the installation's CA, made on the first start. Replicas sharing a
// PostgreSQL store may start together: the CA is written only if absent, in the same
// transaction that looked for it (the stores serialise their write transactions: SQLite
// has one writer, PostgreSQL writes under one advisory lock), and what the store then holds
// is what every replica uses, so a CA made and not written is simply dropped.
func loadCA(ctx context.Context, db clouddb.Store, c *clouddb.Cipher) (*pki.CA, error) {
	var certPEM, sealedKey string
	err := db.Update(ctx, func(tx clouddb.Tx) error {
		var err error
		certPEM, err = tx.Setting(ctx, caCertSetting)
		if err == nil {
			sealedKey, err = tx.Setting(ctx, caKeySetting)
			return err
		}
		if !errors.Is(err, clouddb.ErrNotFound) {
			return err
		}
		ca, err := pki.New("clouddb installation CA")
		if err != nil {
			return err
		}
		certPEM, sealedKey = string(ca.CertificatePEM()), c.Seal(string(ca.KeyPEM()))
		if err = tx.PutSetting(ctx, caCertSetting, certPEM); err != nil {
			return err
		}
		return tx.PutSetting(ctx, caKeySetting, sealedKey)
	})
	if err != nil {
		return nil, fmt.Errorf("installation CA: %w", err)
	}
	keyPEM, err := c.Open(sealedKey)
	if err != nil {
		return nil, fmt.Errorf("installation CA: %w", err)
	}
	ca, err := pki.Parse([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		return nil, fmt.Errorf("installation CA in the store: %w", err)
	}
	return ca, nil
}
