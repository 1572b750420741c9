package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func newDatabase(s *clouddb.Subscription, name string, port int) *clouddb.Database {
	return &clouddb.Database{
		SubscriptionID: s.ID,
		AccountID:      s.AccountID,
		Status:         clouddb.DatabasePending,
		Port:           port,
		Password:       "pw-" + name,
		Spec: clouddb.DatabaseSpec{
			Name:            name,
			Protocol:        "redis",
			MemoryLimitInGB: 0.5,
			DataPersistence: "aof-every-1-second",
		},
	}
}

// fullSpec sets every kind of field of a spec: scalars, pointers, slices, nested structs.
func fullSpec(name string) clouddb.DatabaseSpec {
	no := false
	return clouddb.DatabaseSpec{
		Name:                                name,
		Protocol:                            "redis",
		MemoryLimitInGB:                     1.5,
		DatasetSizeInGB:                     1,
		SupportOSSClusterAPI:                true,
		UseExternalEndpointForOSSClusterAPI: true,
		RespVersion:                         "resp3",
		DataPersistence:                     "snapshot-every-1-hour",
		DataEvictionPolicy:                  "allkeys-lru",
		Replication:                         true,
		ThroughputMeasurement:               &clouddb.Throughput{By: "operations-per-second", Value: 25000},
		AverageItemSizeInBytes:              1000,
		RAMPercentage:                       20,
		SourceIPs:                           []string{"10.0.0.0/8", "192.168.0.0/16"},
		ClientSSLCertificate:                "-----BEGIN CERTIFICATE-----",
		ClientTLSCertificates:               []string{"c1", "c2"},
		EnableDefaultUser:                   &no,
		Alerts:                              []clouddb.Alert{{Name: "dataset-size", Value: 80}},
		PeriodicBackupPath:                  "file:///backups",
		RemoteBackup: &clouddb.RemoteBackup{
			Active: true, Interval: "every-6-hours", TimeUTC: "03:00",
			StorageType: "aws-s3", StoragePath: "s3://bucket/path",
		},
		QueryPerformanceFactor:  "2x",
		RedisVersion:            "7.4",
		AutoMinorVersionUpgrade: true,
		RegexRules:              []string{".*"},
		Tags:                    []clouddb.Tag{{Key: "env", Value: "test"}},
		Port:                    12000,
	}
}

func testDatabase(t *testing.T, open OpenFunc) {
	// setupSubs adds two subscriptions of A and one of B.
	setupSubs := func(t *testing.T) (*bundle, *clouddb.Subscription, *clouddb.Subscription, *clouddb.Subscription) {
		bn := setup(t, open)
		a1 := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "a1")
		a2 := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "a2")
		b1 := newSubscription(bn.b.ID, clouddb.InternalCloudAccountID, "b1")
		bn.update(t, func(tx clouddb.Tx) error {
			for _, s := range []*clouddb.Subscription{a1, a2, b1} {
				require.NoError(t, tx.CreateSubscription(bn.ctx, s))
			}
			return nil
		})
		return bn, a1, a2, b1
	}
	get := func(t *testing.T, bn *bundle, id int) *clouddb.Database {
		t.Helper()
		var d *clouddb.Database
		bn.view(t, func(tx clouddb.Tx) error {
			var err error
			d, err = tx.Database(bn.ctx, 0, id)
			return err
		})
		return d
	}
	create := func(bn *bundle, d *clouddb.Database) error {
		return bn.tryUpdate(func(tx clouddb.Tx) error { return tx.CreateDatabase(bn.ctx, d) })
	}

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		bn, a1, _, _ := setupSubs(t)
		d := newDatabase(a1, "db1", 10001)
		d.Spec = fullSpec("db1")
		d.Spec.Password = "in-the-command-only"
		d.StatusDetail = "starting"
		require.NoError(t, create(bn, d))
		require.NotZero(t, d.ID)
		require.Equal(t, 1, d.Generation)
		requireStamped(t, d.CreatedAt)
		require.Equal(t, d.CreatedAt, d.UpdatedAt)
		require.True(t, d.ActivatedOn.IsZero())
		require.Empty(t, d.Spec.Password, "Spec.Password is not stored; the password is Database.Password")

		want := *d
		want.Spec = fullSpec("db1")
		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Database(bn.ctx, bn.a.ID, d.ID)
			require.NoError(t, err)
			require.Equal(t, &want, got)
			require.True(t, got.ActivatedOn.IsZero(), "ActivatedOn stays zero until activation")
			require.Equal(t, "pw-db1", got.Password)

			got, err = tx.Database(bn.ctx, 0, d.ID)
			require.NoError(t, err)
			require.Equal(t, &want, got)

			_, err = tx.Database(bn.ctx, bn.b.ID, d.ID)
			require.ErrorIs(t, err, clouddb.ErrNotFound, "another account's database is not found")
			_, err = tx.Database(bn.ctx, bn.a.ID, d.ID+1000)
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})

		// A preset ActivatedOn is kept.
		d2 := newDatabase(a1, "db2", 10002)
		d2.Status = clouddb.DatabaseActive
		d2.ActivatedOn = base
		require.NoError(t, create(bn, d2))
		require.Equal(t, d2, get(t, bn, d2.ID))
	})

	t.Run("NameUnique", func(t *testing.T) {
		t.Parallel()
		bn, a1, a2, _ := setupSubs(t)
		first := newDatabase(a1, "db1", 10001)
		require.NoError(t, create(bn, first))

		require.ErrorIs(t, create(bn, newDatabase(a1, "db1", 10002)), clouddb.ErrConflict,
			"a name is unique in its subscription")
		require.NoError(t, create(bn, newDatabase(a2, "db1", 10003)),
			"the same name in another subscription is fine")

		other := newDatabase(a1, "db2", 10004)
		require.NoError(t, create(bn, other))
		renamed := *other
		renamed.Spec.Name = "db1"
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateDatabase(bn.ctx, &renamed) }),
			clouddb.ErrConflict, "a rename onto a taken name conflicts")
		require.Equal(t, other, get(t, bn, other.ID), "the failed update wrote nothing")

		// Once the first is being deleted, its name is free again.
		first.Status = clouddb.DatabaseDeleting
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateDatabase(bn.ctx, first) })
		again := newDatabase(a1, "db1", 10005)
		require.NoError(t, create(bn, again))
		require.Equal(t, again, get(t, bn, again.ID))

		// But not for a third one.
		require.ErrorIs(t, create(bn, newDatabase(a1, "db1", 10006)), clouddb.ErrConflict)
	})

	t.Run("PortUnique", func(t *testing.T) {
		t.Parallel()
		bn, a1, _, b1 := setupSubs(t)
		d := newDatabase(a1, "db1", 10001)
		require.NoError(t, create(bn, d))
		require.ErrorIs(t, create(bn, newDatabase(b1, "db2", 10001)), clouddb.ErrConflict,
			"a port is unique across accounts")

		// A port stays taken while its database is being deleted.
		d.Status = clouddb.DatabaseDeleting
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateDatabase(bn.ctx, d) })
		require.ErrorIs(t, create(bn, newDatabase(a1, "db1", 10001)), clouddb.ErrConflict)

		other := newDatabase(a1, "db3", 10003)
		require.NoError(t, create(bn, other))
		moved := *other
		moved.Port = 10001
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateDatabase(bn.ctx, &moved) }),
			clouddb.ErrConflict)

		bn.view(t, func(tx clouddb.Tx) error {
			ports, err := tx.UsedPorts(bn.ctx)
			require.NoError(t, err)
			require.ElementsMatch(t, []int{10001, 10003}, ports)
			return nil
		})

		// Deleting the row frees the port.
		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteDatabase(bn.ctx, d.ID) })
		require.NoError(t, create(bn, newDatabase(b1, "db2", 10001)))
		bn.view(t, func(tx clouddb.Tx) error {
			_, err := tx.Database(bn.ctx, 0, d.ID)
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteDatabase(bn.ctx, d.ID) }), clouddb.ErrNotFound)
	})

	t.Run("Update", func(t *testing.T) {
		t.Parallel()
		bn, a1, _, _ := setupSubs(t)
		d := newDatabase(a1, "db1", 10001)
		require.NoError(t, create(bn, d))

		upd := *d
		upd.Spec = fullSpec("db1-renamed")
		upd.Password = "new-password"
		upd.Status = clouddb.DatabaseChangePending
		upd.StatusDetail = "resizing"
		upd.ReplicaOf = []string{"redis://:pw@10.0.0.1:6379", "127.0.0.1:10002"}
		upd.Generation = 5 // the caller owns the generation
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateDatabase(bn.ctx, &upd) })
		require.Equal(t, d.CreatedAt, upd.CreatedAt)
		require.Equal(t, &upd, get(t, bn, d.ID))

		upd.ReplicaOf = nil
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateDatabase(bn.ctx, &upd) })
		require.Nil(t, get(t, bn, d.ID).ReplicaOf, "an empty list clears the sources")

		missing := *d
		missing.ID += 1000
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateDatabase(bn.ctx, &missing) }), clouddb.ErrNotFound)
	})

	t.Run("State", func(t *testing.T) {
		t.Parallel()
		bn, a1, _, _ := setupSubs(t)
		d := newDatabase(a1, "db1", 10001)
		require.NoError(t, create(bn, d))
		require.Equal(t, clouddb.DatabaseState{}, get(t, bn, d.ID).State)

		at := time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)
		st := clouddb.DatabaseState{
			Backup: &clouddb.OperationStatus{Status: clouddb.OperationSuccess, Time: at, Location: "/backups/db1.rdb"},
			Import: &clouddb.OperationStatus{Status: clouddb.OperationFailed, Time: at, FailureReason: "file-corrupted",
				FailureReasonParams: []clouddb.Tag{{Key: "uri", Value: "http://x/y.rdb"}}},
		}
		bn.update(t, func(tx clouddb.Tx) error { return tx.SetDatabaseState(bn.ctx, d.ID, st) })
		got := get(t, bn, d.ID)
		require.Equal(t, st, got.State)
		require.Equal(t, d.UpdatedAt, got.UpdatedAt, "data operations are not configuration changes")
		require.Equal(t, d.Generation, got.Generation)
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.SetDatabaseState(bn.ctx, d.ID+1000, st) }), clouddb.ErrNotFound)
	})

	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		bn, a1, _, _ := setupSubs(t)
		d := newDatabase(a1, "db1", 10001)
		require.NoError(t, create(bn, d))
		set := func(generation int, s clouddb.DatabaseStatus, detail string) bool {
			var ok bool
			bn.update(t, func(tx clouddb.Tx) error {
				var err error
				ok, err = tx.SetDatabaseStatus(bn.ctx, d.ID, generation, s, detail)
				return err
			})
			return ok
		}

		require.False(t, set(2, clouddb.DatabaseActive, ""), "a newer generation than the row's changes nothing")
		require.Equal(t, d, get(t, bn, d.ID))

		require.True(t, set(1, clouddb.DatabaseActive, ""))
		got := get(t, bn, d.ID)
		require.Equal(t, clouddb.DatabaseActive, got.Status)
		require.Equal(t, 1, got.Generation, "a status change is not a new generation")
		requireStamped(t, got.ActivatedOn)
		activated := got.ActivatedOn

		// The spec changes: the reconciler's result for generation 1 is stale.
		upd := *got
		upd.Status = clouddb.DatabaseChangePending
		upd.Spec.MemoryLimitInGB = 2
		upd.Generation = 2
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateDatabase(bn.ctx, &upd) })
		require.False(t, set(1, clouddb.DatabaseError, "stale"))
		require.Equal(t, &upd, get(t, bn, d.ID), "a stale generation changes nothing")

		require.True(t, set(2, clouddb.DatabaseError, "out of memory"))
		got = get(t, bn, d.ID)
		require.Equal(t, clouddb.DatabaseError, got.Status)
		require.Equal(t, "out of memory", got.StatusDetail)
		require.Equal(t, activated, got.ActivatedOn)

		time.Sleep(2 * time.Millisecond) // a second activation would carry a later time
		require.True(t, set(2, clouddb.DatabaseActive, ""))
		got = get(t, bn, d.ID)
		require.Equal(t, clouddb.DatabaseActive, got.Status)
		require.Empty(t, got.StatusDetail)
		require.Equal(t, activated, got.ActivatedOn, "ActivatedOn is set on the first activation only")

		require.False(t, set(1, clouddb.DatabaseActive, ""))
		ok := true
		bn.update(t, func(tx clouddb.Tx) error {
			var err error
			ok, err = tx.SetDatabaseStatus(bn.ctx, d.ID+1000, 1, clouddb.DatabaseActive, "")
			return err
		})
		require.False(t, ok, "a missing row changes nothing")
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		bn, a1, a2, b1 := setupSubs(t)
		var dbs []*clouddb.Database
		statuses := []clouddb.DatabaseStatus{
			clouddb.DatabaseActive, clouddb.DatabaseDeleting, clouddb.DatabasePending,
			clouddb.DatabaseError, clouddb.DatabaseActive,
		}
		bn.update(t, func(tx clouddb.Tx) error {
			for i, s := range statuses {
				d := newDatabase(a1, "db"+string(rune('a'+i)), 10001+i)
				d.Status = s
				require.NoError(t, tx.CreateDatabase(bn.ctx, d))
				dbs = append(dbs, d)
			}
			return nil
		})
		inA2 := newDatabase(a2, "other", 10010)
		inB1 := newDatabase(b1, "dba", 10011)
		require.NoError(t, create(bn, inA2))
		require.NoError(t, create(bn, inB1))

		list := func(f clouddb.DatabaseFilter) ([]*clouddb.Database, int) {
			var out []*clouddb.Database
			var total int
			bn.view(t, func(tx clouddb.Tx) error {
				var err error
				out, total, err = tx.Databases(bn.ctx, f)
				return err
			})
			return out, total
		}
		got, total := list(clouddb.DatabaseFilter{AccountID: bn.a.ID})
		require.Equal(t, append(dbs[:5:5], inA2), got)
		require.Equal(t, 6, total)

		got, total = list(clouddb.DatabaseFilter{AccountID: bn.a.ID, SubscriptionID: a1.ID, Offset: 1, Limit: 2})
		require.Equal(t, dbs[1:3], got)
		require.Equal(t, 5, total, "the total ignores Offset and Limit")

		got, total = list(clouddb.DatabaseFilter{SubscriptionID: a1.ID, Offset: 3})
		require.Equal(t, dbs[3:], got, "Limit 0 means no limit")
		require.Equal(t, 5, total)

		got, total = list(clouddb.DatabaseFilter{SubscriptionID: a1.ID, Offset: 10, Limit: 2})
		require.Empty(t, got)
		require.Equal(t, 5, total)

		got, total = list(clouddb.DatabaseFilter{SubscriptionID: a1.ID, ExcludeDeleting: true, Limit: 3})
		require.Equal(t, []*clouddb.Database{dbs[0], dbs[2], dbs[3]}, got)
		require.Equal(t, 4, total)

		got, total = list(clouddb.DatabaseFilter{AccountID: bn.a.ID, Statuses: []clouddb.DatabaseStatus{clouddb.DatabaseActive, clouddb.DatabaseError}})
		require.Equal(t, []*clouddb.Database{dbs[0], dbs[3], dbs[4]}, got)
		require.Equal(t, 3, total)

		got, total = list(clouddb.DatabaseFilter{AccountID: bn.b.ID})
		require.Equal(t, []*clouddb.Database{inB1}, got)
		require.Equal(t, 1, total)

		got, total = list(clouddb.DatabaseFilter{})
		require.Equal(t, append(dbs[:5:5], inA2, inB1), got, "account 0 lists every account")
		require.Equal(t, 7, total)

		bn.view(t, func(tx clouddb.Tx) error {
			ports, err := tx.UsedPorts(bn.ctx)
			require.NoError(t, err)
			require.ElementsMatch(t, []int{10001, 10002, 10003, 10004, 10005, 10010, 10011}, ports,
				"UsedPorts includes databases being deleted")
			return nil
		})
	})
}
