package postgres

import (
	"context"
	"fmt"

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
	id, err := tx.insert(ctx, "subscriptions", s.ID, `INSERT INTO subscriptions (id, account_id, name,
		status, deployment_type, payment_method_id, payment_method, memory_storage,
		public_endpoint_access, persistent_storage_encryption_type, redis_version,
		deletion_grace_period, cloud_providers, maintenance_windows, cidr_allowlist,
		capacity_gb, generation, created_at, updated_at)
		VALUES (`+newID("subscriptions")+`, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
		$15, $16, $17, $18, $19) RETURNING id`,
		s.AccountID, s.Name, string(s.Status), s.DeploymentType, s.PaymentMethodID,
		s.PaymentMethod, s.MemoryStorage, s.PublicEndpointAccess,
		s.PersistentStorageEncryptionType, s.RedisVersion, s.DeletionGracePeriod, providers,
		windows, allowlist, s.CapacityGB, s.Generation, timeArg(s.CreatedAt), timeArg(s.UpdatedAt))
	if err != nil {
		return err
	}
	s.ID = id
	return nil
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
		&s.CloudProviders, &s.MaintenanceWindows, &s.CIDRAllowlist, &s.CapacityGB,
		&s.Generation, timeCol{&s.CreatedAt}, timeCol{&s.UpdatedAt})
	return &s, err
}

// Subscription finds a subscription of the account (of any account for accountID 0).
func (tx *Tx) Subscription(ctx context.Context, accountID, id int) (*clouddb.Subscription, error) {
	var w where
	w.add("id = " + w.arg(id))
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return one(scanSubscription(tx.tx.QueryRow(ctx,
		`SELECT `+subscriptionColumns+` FROM subscriptions`+w.String(), w.args...)))
}

// Subscriptions lists subscriptions by id. CloudAccountID matches any of a subscription's
// cloud provider entries.
func (tx *Tx) Subscriptions(ctx context.Context, f clouddb.SubscriptionFilter) ([]*clouddb.Subscription, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id = " + w.arg(f.AccountID))
	}
	whereIn(&w, "status", f.Statuses)
	if f.CloudAccountID != 0 {
		// jsonb containment: some element of the array has this cloudAccountId.
		w.add("cloud_providers @> " + w.arg(fmt.Sprintf(`[{"cloudAccountId": %d}]`, f.CloudAccountID)) + "::jsonb")
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
	err = mustAffect(tx.tx.Exec(ctx, `UPDATE subscriptions SET name = $1, status = $2,
		deployment_type = $3, payment_method_id = $4, payment_method = $5, memory_storage = $6,
		public_endpoint_access = $7, persistent_storage_encryption_type = $8, redis_version = $9,
		deletion_grace_period = $10, cloud_providers = $11, maintenance_windows = $12,
		cidr_allowlist = $13, capacity_gb = $14, generation = $15, updated_at = $16
		WHERE id = $17`,
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
	return mustAffect(tx.tx.Exec(ctx, `DELETE FROM subscriptions WHERE id = $1`, id))
}

// SetSubscriptionStatus sets the status if the generation still matches; it reports
// whether it did (false also for a missing row).
func (tx *Tx) SetSubscriptionStatus(ctx context.Context, id, generation int, s clouddb.SubscriptionStatus) (bool, error) {
	return affected(tx.tx.Exec(ctx, `UPDATE subscriptions SET status = $1, updated_at = $2
		WHERE id = $3 AND generation = $4`, string(s), timeArg(tx.now), id, generation))
}
