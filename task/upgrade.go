package task

import (
	"context"
	"errors"
	"fmt"

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
	if u := d.State.Upgrade; u != nil && u.Status == clouddb.UpgradeFailed && u.Target == d.Spec.RedisVersion {
		// The stored version is the target of an upgrade that failed (the server was
		// rolled back): what serves the data is the version it came from.
		from = u.From
	}
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

// Savepoint hands fn the recording transaction too: the embedded Tx's Savepoint would
// hand it the bare one, whose status changes record no upgrade outcome.
func (tx upgradeTx) Savepoint(ctx context.Context, fn func(clouddb.Tx) error) error {
	return tx.Tx.Savepoint(ctx, func(in clouddb.Tx) error { return fn(upgradeTx{in}) })
}

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

// servedVersions is a driver that can tell the Redis version that last served a
// database's data ("" when nothing tells), so that a stored version can be made to
// agree with it (see NormalizeRedisVersions).
type servedVersions interface {
	ServedVersion(ctx context.Context, in clouddb.Instance) (string, error)
}

// NormalizeRedisVersions makes each database's stored Redis version one its server runs,
// before the reconciler acts on them. Before clouddb offered several versions the stored
// redisVersion was free text ("7.4", "latest", "6.0.5", or none) while every server ran
// the one redis-server there was: taken at its word now, it would name a binary this
// clouddb does not have, or move the server to another version. The stored version
// becomes the one that served the data (see RedisVersions.Keep), or, for a database
// whose server never ran, the default when it names no offered version. A stored
// version newer than the served one is left alone when an upgrade asked for it.
//
// It needs a Driver that reports served versions; with another it does nothing. Only a
// store error fails it.
func (e *Engine) NormalizeRedisVersions(ctx context.Context) error {
	e.init()
	drv, ok := e.Driver.(servedVersions)
	if !ok {
		return nil
	}
	versions := e.RedisVersions.OrDefault()
	var dbs []*clouddb.Database
	if err := e.Store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		dbs, _, err = tx.Databases(ctx, clouddb.DatabaseFilter{ExcludeDeleting: true})
		return err
	}); err != nil {
		return err
	}
	for _, d := range dbs {
		served, err := drv.ServedVersion(ctx, clouddb.InstanceOf(d))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Its stored version stays; the driver keeps what runs for one it does not
			// offer all the same.
			e.Logger.Warn("cannot tell which Redis version served a database's data", "database_id", d.ID, "err", err)
			continue
		}
		want := settledVersion(versions, d, served)
		if want == d.Spec.RedisVersion {
			continue
		}
		var changed bool
		if err := e.Store.Update(ctx, func(tx clouddb.Tx) error {
			cur, err := tx.Database(ctx, 0, d.ID)
			if errors.Is(err, clouddb.ErrNotFound) || (err == nil && (cur.Generation != d.Generation || cur.Spec.RedisVersion != d.Spec.RedisVersion)) {
				return nil // gone or changed meanwhile: a change stores an offered version
			} else if err != nil {
				return err
			}
			cur.Spec.RedisVersion, changed = want, true
			return tx.UpdateDatabase(ctx, cur)
		}); err != nil {
			return fmt.Errorf("database %d: %w", d.ID, err)
		}
		if changed {
			e.Logger.Warn("stored Redis version made the one the database's server runs", "database_id", d.ID,
				"stored", d.Spec.RedisVersion, "served", served, "now", want)
		}
	}
	return nil
}

// settledVersion is the version database d is to store, its data last served by served
// ("" when nothing tells).
func settledVersion(versions clouddb.RedisVersions, d *clouddb.Database, served string) string {
	stored := d.Spec.RedisVersion
	if served == "" {
		if versions.Offers(stored) {
			return stored
		}
		return versions.Default
	}
	if u := d.State.Upgrade; versions.Offers(stored) && clouddb.CompareRedisVersions(stored, served) > 0 && u != nil && u.Target == stored {
		return stored // an upgrade not carried out yet
	}
	return versions.Keep(served)
}
