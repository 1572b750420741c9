package task

import (
	"context"

	"clouddb"
)

// DefaultRedisVersion is the version an Engine without RedisVersions offers: that of the
// redis-server 7.0 this project is built and tested with.
const DefaultRedisVersion = "7.0"

// versions are the Redis versions databases may run.
func (v *env) versions() clouddb.RedisVersions {
	if len(v.RedisVersions.Offered) == 0 {
		return clouddb.OneRedisVersion(DefaultRedisVersion)
	}
	return v.RedisVersions
}

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
	d.State.Upgrade = &clouddb.UpgradeState{From: from, Target: req.TargetRedisVersion, Time: v.Now()}
	if err := tx.UpdateDatabase(ctx, d); err != nil {
		return 0, err
	}
	return 0, v.log(ctx, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) upgrade from Redis %s to %s requested", d.Spec.Name, d.ID, from, req.TargetRedisVersion)
}
