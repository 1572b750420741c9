package task

import (
	"context"

	"clouddb"
)

// versions are the Redis versions databases may run.
func (v *env) versions() clouddb.RedisVersions { return v.RedisVersions.OrDefault() }

// upgradeDatabase moves a database to a newer Redis version: the stored version changes
// and the database goes pending like an update, and the reconciler restarts its server on
// the new version's binary with its data (see the local driver). Like the real API it
// answers response {} (no resource id).
func upgradeDatabase(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var req clouddb.UpgradeRequest
	if err := decode(t, &req); err != nil {
		return 0, err
	}
	_, d, err := changeableDatabase(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	versions := v.versions()
	from := versions.Resolve(d.Spec.RedisVersion)
	if err := versions.CheckUpgrade(from, req.TargetRedisVersion); err != nil {
		return 0, err
	}
	d.Spec.RedisVersion = req.TargetRedisVersion
	d.Generation++
	if d.Status == clouddb.DatabaseActive {
		d.Status = clouddb.DatabaseChangePending
	} else {
		d.Status = clouddb.DatabasePending
	}
	d.StatusDetail = ""
	d.State.Upgrade = &clouddb.UpgradeState{From: from, Target: req.TargetRedisVersion, Time: v.Now(),
		Generation: d.Generation, Status: clouddb.UpgradeInProgress}
	if err := tx.UpdateDatabase(ctx, d); err != nil {
		return 0, err
	}
	return 0, v.log(ctx, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) upgrade from Redis %s to %s requested", d.Spec.Name, d.ID, from, req.TargetRedisVersion)
}

// RecordUpgradeOutcomes returns the store the reconciler is to use: the same store, whose
// transactions also record an upgrade's outcome (see UpgradeState.Settle) in the
// transaction that settles the database generation carrying it. The outcome is thus
// known exactly when it happens, and a later failure of the server, or a later change,
// does not rewrite it.
func RecordUpgradeOutcomes(s clouddb.Store) clouddb.Store { return upgradeStore{s} }

type upgradeStore struct{ clouddb.Store }

func (s upgradeStore) Update(ctx context.Context, fn func(clouddb.Tx) error) error {
	return s.Store.Update(ctx, func(tx clouddb.Tx) error { return fn(upgradeTx{tx}) })
}

type upgradeTx struct{ clouddb.Tx }

func (tx upgradeTx) SetDatabaseStatus(ctx context.Context, id, generation int, s clouddb.DatabaseStatus, detail string) (bool, error) {
	set, err := tx.Tx.SetDatabaseStatus(ctx, id, generation, s, detail)
	if err != nil || !set {
		return set, err
	}
	d, err := tx.Database(ctx, 0, id)
	if err != nil {
		return set, err
	}
	if !d.State.Upgrade.Settle(generation, s) {
		return set, nil
	}
	return set, tx.SetDatabaseState(ctx, id, d.State)
}
