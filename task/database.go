package task

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"clouddb"
	"clouddb/blob"
)

func findDatabase(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) (*clouddb.Database, error) {
	d, err := tx.Database(ctx, t.AccountID, t.DatabaseID)
	if errors.Is(err, clouddb.ErrNotFound) || (err == nil && (d.SubscriptionID != t.SubscriptionID || d.Status == clouddb.DatabaseDeleting)) {
		return nil, clouddb.NotFound(clouddb.ErrTypeDatabaseNotFound, "database %d not found in subscription %d", t.DatabaseID, t.SubscriptionID)
	}
	return d, err
}

// activeSubscription is the task's subscription, which must be active for its databases
// to change.
func activeSubscription(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) (*clouddb.Subscription, error) {
	sub, err := findSubscription(ctx, tx, t.AccountID, t.SubscriptionID)
	if err != nil {
		return nil, err
	}
	return sub, requireActive(sub)
}

// changeableDatabase is the task's database in its active subscription.
func changeableDatabase(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) (*clouddb.Subscription, *clouddb.Database, error) {
	sub, err := activeSubscription(ctx, tx, t)
	if err != nil {
		return nil, nil, err
	}
	d, err := findDatabase(ctx, tx, t)
	return sub, d, err
}

// checkName fails when another live database of the subscription has the name.
func checkName(ctx context.Context, tx clouddb.Tx, subID, selfID int, name string) error {
	dbs, _, err := tx.Databases(ctx, clouddb.DatabaseFilter{SubscriptionID: subID, ExcludeDeleting: true})
	if err != nil {
		return err
	}
	for _, d := range dbs {
		if d.ID != selfID && d.Spec.Name == name {
			return clouddb.Conflict(clouddb.ErrTypeDatabaseNameTaken, "database: name %q is already used in subscription %d", name, subID)
		}
	}
	return nil
}

// checkReplicaOf checks a database's sources against the account: a bare host:port must
// name another live database of the same account (by its port), whose password clouddb
// supplies.
func checkReplicaOf(ctx context.Context, tx clouddb.Tx, accountID, selfID int, uris []string) error {
	srcs, err := clouddb.ValidateReplicaOf(uris)
	if err != nil {
		return err
	}
	var dbs []*clouddb.Database
	for i, s := range srcs {
		if !s.SameAccount {
			// Refused at once, rather than when the replicator first dials it; the
			// dialer's guard still checks what a host name resolves to.
			if err = blob.CheckHost(s.Host); err != nil {
				return clouddb.Invalid(clouddb.ErrTypeInvalidField, "database: replicaOf[%d] (host %s): %v", i, s.Host, err)
			}
			continue
		}
		if dbs == nil {
			if dbs, _, err = tx.Databases(ctx, clouddb.DatabaseFilter{AccountID: accountID, ExcludeDeleting: true}); err != nil {
				return err
			}
		}
		found := false
		for _, d := range dbs {
			if d.Port == s.Port {
				if d.ID == selfID {
					return clouddb.Invalid(clouddb.ErrTypeInvalidField, "database: replicaOf[%d] %q is the database itself", i, s.URI)
				}
				found = true
			}
		}
		if !found {
			return clouddb.NotFound(clouddb.ErrTypeDatabaseNotFound,
				"database: replicaOf[%d] %q names no database of this account; give another server as redis://user:password@host:port", i, s.URI)
		}
	}
	return nil
}

// reserveCapacity resizes the subscription when its databases would need more than its
// capacity once one database changes from oldGB to newGB: the subscription goes pending
// until the resize is provisioned.
func reserveCapacity(ctx context.Context, tx clouddb.Tx, sub *clouddb.Subscription, oldGB, newGB float64) error {
	if newGB <= oldGB && oldGB > 0 {
		// A change that does not grow the database needs no more than it holds (a
		// database stored before memoryLimitInGb counted the replica may count more now
		// than when it was made: it is not resized for that on an unrelated change).
		return nil
	}
	dbs, _, err := tx.Databases(ctx, clouddb.DatabaseFilter{SubscriptionID: sub.ID, ExcludeDeleting: true})
	if err != nil {
		return err
	}
	need := newGB - oldGB
	for _, d := range dbs {
		need += d.Spec.SizeGB()
	}
	if need <= sub.CapacityGB {
		return nil
	}
	sub.CapacityGB = clouddb.GrownCapacity(sub.CapacityGB, need)
	if sub.Status == clouddb.SubscriptionActive {
		sub.Status = clouddb.SubscriptionPending
		sub.Generation++
	}
	return tx.UpdateSubscription(ctx, sub)
}

// reserveMemory checks that the databases still fit the memory the host keeps for them
// when one of them grows from oldBytes to newBytes (a create grows from 0; both are
// footprints). Their servers run on this host, each up to its maxmemory: a database that
// would not fit is refused now rather than killed by the kernel later.
func reserveMemory(ctx context.Context, v *env, tx clouddb.Tx, oldBytes, newBytes int64) error {
	if v.MemoryLimit <= 0 || newBytes <= oldBytes {
		return nil
	}
	dbs, _, err := tx.Databases(ctx, clouddb.DatabaseFilter{ExcludeDeleting: true})
	if err != nil {
		return err
	}
	var taken int64
	for _, d := range dbs {
		taken += footprint(&d.Spec)
	}
	taken -= oldBytes
	if taken+newBytes <= v.MemoryLimit {
		return nil
	}
	return clouddb.Errorf(http.StatusInsufficientStorage, clouddb.ErrTypeNoMemory,
		"database: this host keeps %s of memory for databases (--db-memory), %s of it is taken, and this database needs %s",
		gib(v.MemoryLimit), gib(taken), gib(newBytes))
}

// gib renders a byte count in GB, the unit of memoryLimitInGb, to the MB.
func gib(b int64) string {
	return strconv.FormatFloat(math.Round(float64(b)/(1<<30)*1000)/1000, 'f', -1, 64) + " GB"
}

// admitDatabase checks that a new database fits this host: its memory and a port, which
// it returns. It reserves nothing: the port is the database's once its row is written.
func admitDatabase(ctx context.Context, v *env, tx clouddb.Tx, spec *clouddb.DatabaseSpec) (int, error) {
	if err := reserveMemory(ctx, v, tx, 0, footprint(spec)); err != nil {
		return 0, err
	}
	return v.Ports.Allocate(ctx, tx, spec.Port)
}

// insertDatabase stores a new database in the pending state on a fresh port.
func insertDatabase(ctx context.Context, v *env, tx clouddb.Tx, sub *clouddb.Subscription, spec clouddb.DatabaseSpec, password string, replicaOf []string) (*clouddb.Database, error) {
	spec.UseCurrentSizeRule()
	port, err := admitDatabase(ctx, v, tx, &spec)
	if err != nil {
		return nil, err
	}
	d := &clouddb.Database{
		SubscriptionID: sub.ID,
		AccountID:      sub.AccountID,
		Status:         clouddb.DatabasePending,
		Port:           port,
		Password:       password,
		ReplicaOf:      replicaOf,
		Spec:           spec,
		Generation:     1,
	}
	if err := tx.CreateDatabase(ctx, d); errors.Is(err, clouddb.ErrConflict) {
		return nil, clouddb.Conflict(clouddb.ErrTypeDatabaseNameTaken, "database: name %q is already used in subscription %d", spec.Name, sub.ID)
	} else if err != nil {
		return nil, err
	}
	return d, v.log(ctx, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) created in subscription %d", d.Spec.Name, d.ID, sub.ID)
}

func createDatabase(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var spec clouddb.DatabaseSpec
	if err := decode(t, &spec); err != nil {
		return 0, err
	}
	spec.UseCurrentSizeRule()
	sub, err := activeSubscription(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	if err = spec.ValidateCreate(); err != nil {
		return 0, err
	}
	if spec.RedisVersion, err = v.versions().DatabaseVersion(spec.RedisVersion); err != nil {
		return 0, err
	}
	if len(spec.SourceIPs) == 0 {
		spec.SourceIPs = clouddb.DefaultSourceIPs(sub.PublicEndpointAccess)
	}
	if err = checkBackupDestinations(&spec, v.Blob); err != nil {
		return 0, err
	}
	if err = checkName(ctx, tx, sub.ID, 0, spec.Name); err != nil {
		return 0, err
	}
	if err = checkReplicaOf(ctx, tx, t.AccountID, 0, spec.ReplicaOf); err != nil {
		return 0, err
	}
	if err = spec.CheckReplicaOfTopology(spec.ReplicaOf); err != nil {
		return 0, err
	}
	if spec.DryRun {
		// Every check of a real create, and nothing written: no row, no port, no
		// capacity change, no log entry.
		if _, err = admitDatabase(ctx, v, tx, &spec); err != nil {
			return 0, err
		}
		v.resource = dryRunPricing(spec.Name)
		return 0, nil
	}
	if err = reserveCapacity(ctx, tx, sub, 0, spec.SizeGB()); err != nil {
		return 0, err
	}
	password := spec.Password
	spec.Password = ""
	spec.Quantity = 0
	replicaOf := spec.ReplicaOf
	spec.ReplicaOf = nil
	d, err := insertDatabase(ctx, v, tx, sub, spec, password, replicaOf)
	if err != nil {
		return 0, err
	}
	return d.ID, nil
}

func updateDatabase(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var u clouddb.DatabaseUpdate
	if err := decode(t, &u); err != nil {
		return 0, err
	}
	sub, d, err := changeableDatabase(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	if err := u.Validate(); err != nil {
		return 0, err
	}
	old := d.Spec
	if err := u.Apply(d); err != nil {
		return 0, err
	}
	if err := clouddb.CheckTopologyChange(&old, &d.Spec); err != nil {
		return 0, err
	}
	if err := d.Spec.CheckReplicaOfTopology(d.ReplicaOf); err != nil {
		return 0, err
	}
	if err := reserveTopology(ctx, v, tx, &old, &d.Spec); err != nil {
		return 0, err
	}
	if err := checkBackupDestinations(&d.Spec, v.Blob); err != nil {
		return 0, err
	}
	if u.ReplicaOf != nil {
		if err := checkReplicaOf(ctx, tx, t.AccountID, d.ID, d.ReplicaOf); err != nil {
			return 0, err
		}
	}
	if u.Name != nil {
		if err := checkName(ctx, tx, sub.ID, d.ID, d.Spec.Name); err != nil {
			return 0, err
		}
	}
	if u.DryRun {
		// Checked like a real update; the database, its status and its subscription's
		// capacity stay as they are.
		v.resource = dryRunPricing(d.Spec.Name)
		return 0, nil
	}
	if err := reserveCapacity(ctx, tx, sub, old.SizeGB(), d.Spec.SizeGB()); err != nil {
		return 0, err
	}
	d.Generation++
	if d.Status == clouddb.DatabaseActive {
		d.Status = clouddb.DatabaseChangePending
	} else {
		d.Status = clouddb.DatabasePending
	}
	d.StatusDetail = ""
	d.State.Upgrade.Carry(d.Generation)
	if err := tx.UpdateDatabase(ctx, d); errors.Is(err, clouddb.ErrConflict) {
		return 0, clouddb.Conflict(clouddb.ErrTypeDatabaseNameTaken, "database: name %q is already used in subscription %d", d.Spec.Name, sub.ID)
	} else if err != nil {
		return 0, err
	}
	return d.ID, v.log(ctx, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) updated", d.Spec.Name, d.ID)
}

func deleteDatabase(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	_, d, err := changeableDatabase(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	d.Status = clouddb.DatabaseDeleting
	d.Generation++
	if err := tx.UpdateDatabase(ctx, d); err != nil {
		return 0, err
	}
	return d.ID, v.log(ctx, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) deleted", d.Spec.Name, d.ID)
}
