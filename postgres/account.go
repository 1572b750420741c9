package postgres

import (
	"context"

	"clouddb"
)

// CreateAccount inserts an account.
func (tx *Tx) CreateAccount(ctx context.Context, a *clouddb.Account) error {
	tx.stamp(&a.CreatedAt, &a.UpdatedAt)
	id, err := tx.insert(ctx, "accounts", a.ID, `INSERT INTO accounts (id, name, plan, created_at, updated_at)
		VALUES (`+newID("accounts")+`, $2, $3, $4, $5) RETURNING id`,
		a.Name, string(a.Plan), timeArg(a.CreatedAt), timeArg(a.UpdatedAt))
	if err != nil {
		return err
	}
	a.ID = id
	return nil
}

const accountColumns = `id, name, plan, created_at, updated_at`

func scanAccount(s scanner) (*clouddb.Account, error) {
	var a clouddb.Account
	err := s.Scan(&a.ID, &a.Name, &a.Plan, timeCol{&a.CreatedAt}, timeCol{&a.UpdatedAt})
	return &a, err
}

// Account finds an account by id.
func (tx *Tx) Account(ctx context.Context, id int) (*clouddb.Account, error) {
	return one(scanAccount(tx.tx.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts WHERE id = $1`, id)))
}

// Accounts lists every account by id.
func (tx *Tx) Accounts(ctx context.Context) ([]*clouddb.Account, error) {
	return queryAll(ctx, tx.tx, `SELECT `+accountColumns+` FROM accounts ORDER BY id`, nil, scanAccount)
}

// CreateAPIKey inserts an API key; a key string already in use is a conflict.
func (tx *Tx) CreateAPIKey(ctx context.Context, k *clouddb.APIKey) error {
	tx.stamp(&k.CreatedAt)
	id, err := tx.insert(ctx, "api_keys", k.ID, `INSERT INTO api_keys (id, account_id, name, key, secret_digest, role, created_at)
		VALUES (`+newID("api_keys")+`, $2, $3, $4, $5, $6, $7) RETURNING id`,
		k.AccountID, k.Name, k.Key, k.SecretDigest, string(k.Role), timeArg(k.CreatedAt))
	if err != nil {
		return err
	}
	k.ID = id
	return nil
}

// APIKey finds a key by its public key string.
func (tx *Tx) APIKey(ctx context.Context, key string) (*clouddb.APIKey, error) {
	return one(scanAPIKey(tx.tx.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE key = $1`, key)))
}

const apiKeyColumns = `id, account_id, name, key, secret_digest, role, created_at`

func scanAPIKey(s scanner) (*clouddb.APIKey, error) {
	var k clouddb.APIKey
	err := s.Scan(&k.ID, &k.AccountID, &k.Name, &k.Key, &k.SecretDigest, &k.Role, timeCol{&k.CreatedAt})
	return &k, err
}

// APIKeys lists an account's keys by id (every account's for 0).
func (tx *Tx) APIKeys(ctx context.Context, accountID int) ([]*clouddb.APIKey, error) {
	var w where
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return queryAll(ctx, tx.tx, `SELECT `+apiKeyColumns+` FROM api_keys`+w.String()+` ORDER BY id`, w.args, scanAPIKey)
}

// DeleteAPIKey removes a key by its public key string.
func (tx *Tx) DeleteAPIKey(ctx context.Context, key string) error {
	return mustAffect(tx.tx.Exec(ctx, `DELETE FROM api_keys WHERE key = $1`, key))
}

// CreatePaymentMethod inserts a payment method.
func (tx *Tx) CreatePaymentMethod(ctx context.Context, p *clouddb.PaymentMethod) error {
	id, err := tx.insert(ctx, "payment_methods", p.ID, `INSERT INTO payment_methods
		(id, account_id, type, credit_card_ends_with, name_on_card, expiration_month, expiration_year)
		VALUES (`+newID("payment_methods")+`, $2, $3, $4, $5, $6, $7) RETURNING id`,
		p.AccountID, p.Type, p.CreditCardEndsWith, p.NameOnCard, p.ExpirationMonth, p.ExpirationYear)
	if err != nil {
		return err
	}
	p.ID = id
	return nil
}

// PaymentMethods lists an account's payment methods by id (every account's for 0).
func (tx *Tx) PaymentMethods(ctx context.Context, accountID int) ([]*clouddb.PaymentMethod, error) {
	var w where
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return queryAll(ctx, tx.tx, `SELECT id, account_id, type, credit_card_ends_with, name_on_card,
		expiration_month, expiration_year FROM payment_methods`+w.String()+` ORDER BY id`, w.args,
		func(s scanner) (*clouddb.PaymentMethod, error) {
			var p clouddb.PaymentMethod
			err := s.Scan(&p.ID, &p.AccountID, &p.Type, &p.CreditCardEndsWith, &p.NameOnCard,
				&p.ExpirationMonth, &p.ExpirationYear)
			return &p, err
		})
}
