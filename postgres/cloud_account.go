package postgres

import (
	"context"

	"clouddb"
)

// CreateCloudAccount inserts a cloud account. A preset ID is kept, which is how the
// internal cloud account gets clouddb.InternalCloudAccountID; an unset Generation
// becomes 1.
func (tx *Tx) CreateCloudAccount(ctx context.Context, c *clouddb.CloudAccount) error {
	tx.stamp(&c.CreatedAt, &c.UpdatedAt)
	if c.Generation == 0 {
		c.Generation = 1
	}
	id, err := tx.insert(ctx, "cloud_accounts", c.ID, `INSERT INTO cloud_accounts (id, account_id, name,
		provider, status, access_key_id, access_secret_key, console_username, console_password,
		sign_in_login_url, generation, created_at, updated_at)
		VALUES (`+newID("cloud_accounts")+`, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		RETURNING id`,
		c.AccountID, c.Name, c.Provider, string(c.Status), tx.seal.Seal(c.AccessKeyID),
		tx.seal.Seal(c.AccessSecretKey), c.ConsoleUsername, tx.seal.Seal(c.ConsolePassword), c.SignInLoginURL,
		c.Generation, timeArg(c.CreatedAt), timeArg(c.UpdatedAt))
	if err != nil {
		return err
	}
	c.ID = id
	return nil
}

const cloudAccountColumns = `id, account_id, name, provider, status, access_key_id,
	access_secret_key, console_username, console_password, sign_in_login_url, generation,
	created_at, updated_at`

func (se sealer) scanCloudAccount(s scanner) (*clouddb.CloudAccount, error) {
	var c clouddb.CloudAccount
	err := s.Scan(&c.ID, &c.AccountID, &c.Name, &c.Provider, &c.Status, se.col(&c.AccessKeyID),
		se.col(&c.AccessSecretKey), &c.ConsoleUsername, se.col(&c.ConsolePassword), &c.SignInLoginURL,
		&c.Generation, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt})
	return &c, err
}

// CloudAccount finds a cloud account of the account, or the internal one (any account's
// for accountID 0).
func (tx *Tx) CloudAccount(ctx context.Context, accountID, id int) (*clouddb.CloudAccount, error) {
	var w where
	w.add("id = " + w.arg(id))
	if accountID != 0 {
		w.add("account_id IN (" + w.arg(accountID) + ", 0)")
	}
	return one(tx.seal.scanCloudAccount(tx.tx.QueryRow(ctx,
		`SELECT `+cloudAccountColumns+` FROM cloud_accounts`+w.String(), w.args...)))
}

// CloudAccounts lists cloud accounts by id, the internal one included.
func (tx *Tx) CloudAccounts(ctx context.Context, f clouddb.CloudAccountFilter) ([]*clouddb.CloudAccount, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id IN (" + w.arg(f.AccountID) + ", 0)")
	}
	whereIn(&w, "status", f.Statuses)
	return queryAll(ctx, tx.tx, `SELECT `+cloudAccountColumns+` FROM cloud_accounts`+w.String()+
		` ORDER BY id`, w.args, tx.seal.scanCloudAccount)
}

// UpdateCloudAccount writes every field but the ids and CreatedAt, Generation included:
// the caller decides which changes need provisioning and advances it for those. It sets
// c.UpdatedAt.
func (tx *Tx) UpdateCloudAccount(ctx context.Context, c *clouddb.CloudAccount) error {
	err := mustAffect(tx.tx.Exec(ctx, `UPDATE cloud_accounts SET name = $1, provider = $2,
		status = $3, access_key_id = $4, access_secret_key = $5, console_username = $6,
		console_password = $7, sign_in_login_url = $8, generation = $9, updated_at = $10
		WHERE id = $11`,
		c.Name, c.Provider, string(c.Status), tx.seal.Seal(c.AccessKeyID), tx.seal.Seal(c.AccessSecretKey),
		c.ConsoleUsername, tx.seal.Seal(c.ConsolePassword), c.SignInLoginURL, c.Generation, timeArg(tx.now), c.ID))
	if err != nil {
		return err
	}
	c.UpdatedAt = tx.now
	return nil
}

// DeleteCloudAccount deletes a cloud account.
func (tx *Tx) DeleteCloudAccount(ctx context.Context, id int) error {
	return mustAffect(tx.tx.Exec(ctx, `DELETE FROM cloud_accounts WHERE id = $1`, id))
}

// SetCloudAccountStatus sets the status if the generation still matches; it reports
// whether it did (false also for a missing row).
func (tx *Tx) SetCloudAccountStatus(ctx context.Context, id, generation int, s clouddb.CloudAccountStatus) (bool, error) {
	return affected(tx.tx.Exec(ctx, `UPDATE cloud_accounts SET status = $1, updated_at = $2
		WHERE id = $3 AND generation = $4`, string(s), timeArg(tx.now), id, generation))
}
