package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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

// caEndWarnBefore is how long before the CA's end serve warns of it: a certificate the
// CA issues ends no later than it, and rotating the CA is not supported, so the operator
// needs the time to plan for it.
const caEndWarnBefore = 90 * 24 * time.Hour

// caEndNotice is what serve logs, at now, of a CA that ends at notAfter: a warning
// within caEndWarnBefore of its end, an error once it has ended, nothing (ok false)
// before.
func caEndNotice(notAfter, now time.Time) (level slog.Level, msg string, ok bool) {
	switch {
	case now.After(notAfter):
		return slog.LevelError, "the installation's CA has ended: the TLS databases' certificates ended with it and cannot be renewed", true
	case notAfter.Sub(now) <= caEndWarnBefore:
		return slog.LevelWarn, "the installation's CA ends soon: no certificate it issues can outlive it, so the TLS databases' certificates end with it", true
	}
	return 0, "", false
}

// watchCAEnd logs caEndNotice at once and then daily, until ctx is done: a serve that
// runs for months is told too.
func watchCAEnd(ctx context.Context, log *slog.Logger, notAfter time.Time) {
	tick := time.NewTicker(24 * time.Hour)
	defer tick.Stop()
	for {
		now := time.Now()
		if level, msg, ok := caEndNotice(notAfter, now); ok {
			args := []any{"ca_not_after", notAfter.UTC().Format(time.RFC3339)}
			if level == slog.LevelWarn {
				args = append(args, "days_left", int(notAfter.Sub(now).Hours()/24))
			}
			log.Log(ctx, level, msg, args...)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
