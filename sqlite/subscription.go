package sqlite

import (
	"context"

	"clouddb"
)

// CreateSubscription inserts a subscription; an unset Generation becomes 1.
func (tx *Tx) CreateSubscription(ctx context.Context, s *clouddb.Subscription) error {
	tx.stamp(&s.CreatedAt, &s.UpdatedAt)
	if s.Generation == 0 {
		s.Generation = 1
	}
	providers, windows, allowlist, err := subscriptionJSON(s)
	if err != nil {
		return err
	}
	res, err := tx.tx.ExecContext(ctx, `INSERT INTO subscriptions (id, account_id, name, status,
		deployment_type, payment_method_id, payment_method, memory_storage,
		public_endpoint_access, persistent_storage_encryption_type, redis_version,
		deletion_grace_period, cloud_providers, maintenance_windows, cidr_allowlist,
		capacity_gb, generation, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		idArg(s.ID), s.AccountID, s.Name, string(s.Status), s.DeploymentType, s.PaymentMethodID,
		s.PaymentMethod, s.MemoryStorage, s.PublicEndpointAccess,
		s.PersistentStorageEncryptionType, s.RedisVersion, s.DeletionGracePeriod, providers,
		windows, allowlist, s.CapacityGB, s.Generation, timeArg(s.CreatedAt), timeArg(s.UpdatedAt))
	if err != nil {
		return mapErr(err)
	}
	id, err := res.LastInsertId()
	s.ID = int(id)
	return err
}

const subscriptionColumns = `id, account_id, name, status, deployment_type, payment_method_id,
	payment_method, memory_storage, public_endpoint_access, persistent_storage_encryption_type,
	redis_version, deletion_grace_period, cloud_providers, maintenance_windows, cidr_allowlist,
	capacity_gb, generation, created_at, updated_at`

// subscriptionJSON is the stored form of a subscription's nested structs: its cloud
// providers, maintenance windows and CIDR allow list.
func subscriptionJSON(s *clouddb.Subscription) (providers, windows, allowlist string, err error) {
	if providers, err = jsonArg(s.CloudProviders); err != nil {
		return
	}
	if windows, err = jsonArg(s.MaintenanceWindows); err != nil {
		return
	}
	allowlist, err = jsonArg(s.CIDRAllowlist)
	return
}

func scanSubscription(sc scanner) (*clouddb.Subscription, error) {
	var s clouddb.Subscription
	err := sc.Scan(&s.ID, &s.AccountID, &s.Name, &s.Status, &s.DeploymentType,
		&s.PaymentMethodID, &s.PaymentMethod, &s.MemoryStorage, &s.PublicEndpointAccess,
		&s.PersistentStorageEncryptionType, &s.RedisVersion, &s.DeletionGracePeriod,
		jsonCol{&s.CloudProviders}, jsonCol{&s.MaintenanceWindows}, jsonCol{&s.CIDRAllowlist},
		&s.CapacityGB, &s.Generation, timeCol{&s.CreatedAt}, timeCol{&s.UpdatedAt})
	return &s, err
}

// Subscription finds a subscription of the account (of any account for accountID 0).
func (tx *Tx) Subscription(ctx context.Context, accountID, id int) (*clouddb.Subscription, error) {
	var w where
	w.add("id = ?", id)
	if accountID != 0 {
		w.add("account_id = ?", accountID)
	}
	return one(scanSubscription(tx.tx.QueryRowContext(ctx,
		`SELECT `+subscriptionColumns+` FROM subscriptions`+w.String(), w.args...)))
}

// Subscriptions lists subscriptions by id. CloudAccountID matches any of a subscription's
// cloud provider entries.
func (tx *Tx) Subscriptions(ctx context.Context, f clouddb.SubscriptionFilter) ([]*clouddb.Subscription, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id = ?", f.AccountID)
	}
	whereIn(&w, "status", f.Statuses)
	if f.CloudAccountID != 0 {
		w.add(`EXISTS (SELECT 1 FROM json_each(subscriptions.cloud_providers)
			WHERE json_extract(value, '$.cloudAccountId') = ?)`, f.CloudAccountID)
	}
	return queryAll(ctx, tx.tx, `SELECT `+subscriptionColumns+` FROM subscriptions`+w.String()+
		` ORDER BY id`, w.args, scanSubscription)
}

// UpdateSubscription writes every field but the ids and CreatedAt, Generation included:
// the caller decides which changes need provisioning and advances it for those. It sets
// s.UpdatedAt.
func (tx *Tx) UpdateSubscription(ctx context.Context, s *clouddb.Subscription) error {
	providers, windows, allowlist, err := subscriptionJSON(s)
	if err != nil {
		return err
	}
	err = mustAffect(tx.tx.ExecContext(ctx, `UPDATE subscriptions SET name = ?, status = ?,
		deployment_type = ?, payment_method_id = ?, payment_method = ?, memory_storage = ?,
		public_endpoint_access = ?, persistent_storage_encryption_type = ?, redis_version = ?,
		deletion_grace_period = ?, cloud_providers = ?, maintenance_windows = ?,
		cidr_allowlist = ?, capacity_gb = ?, generation = ?, updated_at = ?
		WHERE id = ?`,
		s.Name, string(s.Status), s.DeploymentType, s.PaymentMethodID, s.PaymentMethod,
		s.MemoryStorage, s.PublicEndpointAccess, s.PersistentStorageEncryptionType,
		s.RedisVersion, s.DeletionGracePeriod, providers, windows, allowlist, s.CapacityGB,
		s.Generation, timeArg(tx.now), s.ID))
	if err != nil {
		return err
	}
	s.UpdatedAt = tx.now
	return nil
}

// DeleteSubscription deletes a subscription. It is a conflict while database rows of the
// subscription remain.
func (tx *Tx) DeleteSubscription(ctx context.Context, id int) error {
	return mustAffect(tx.tx.ExecContext(ctx, `DELETE FROM subscriptions WHERE id = ?`, id))
}

// SetSubscriptionStatus sets the status if the generation still matches; it reports
// whether it did (false also for a missing row).
func (tx *Tx) SetSubscriptionStatus(ctx context.Context, id, generation int, s clouddb.SubscriptionStatus) (bool, error) {
	res, err := tx.tx.ExecContext(ctx, `UPDATE subscriptions SET status = ?, updated_at = ?
		WHERE id = ? AND generation = ?`, string(s), timeArg(tx.now), id, generation)
	if err != nil {
		return false, mapErr(err)
	}
	return affected(res)
}
