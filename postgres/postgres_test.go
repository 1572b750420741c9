package postgres_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/pgtest"
	"clouddb/postgres"
	"clouddb/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// wait is how long a test waits for something another connection or process does.
const wait = 5 * time.Second

// mustOpen opens a store on url and closes it when the test ends.
func mustOpen(tb testing.TB, url string, opts ...postgres.Option) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(tb.Context(), url, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

// rawConn connects to url on a connection of its own, as another process would.
func rawConn(tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(tb.Context(), url)
	require.NoError(tb, err)
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) clouddb.Store {
		return mustOpen(t, pgtest.URL(t))
	})
}

// TestStoreSealed runs the conformance suite with secrets sealed: sealing must be
// invisible to callers.
func TestStoreSealed(t *testing.T) {
	storetest.Run(t, func(t *testing.T) clouddb.Store {
		return mustOpen(t, pgtest.URL(t), postgres.WithCipher(testCipher(t)))
	})
}

func testCipher(t *testing.T) *clouddb.Cipher {
	key, err := clouddb.ParseKey(clouddb.NewKey())
	require.NoError(t, err)
	c, err := clouddb.NewCipher(key)
	require.NoError(t, err)
	return c
}

// TestSecretsAreSealed writes known secrets, then reads every row of every table as
// text on a connection of its own and finds none of them, in plain text or as the hex a
// bytea column shows; reading through the store returns them intact.
func TestSecretsAreSealed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	db := mustOpen(t, url, postgres.WithCipher(testCipher(t)))
	secrets := []string{"Db-Password-7f3a9c", "AKIA-KEY-ID-5b1e", "aws-secret-key-2c8d", "console-pw-9e4f", "payload-secret-0a6b", "source-pw-3d7e",
		"backup-secret-4c2a", "remote-secret-8e1f", "Acl-User-Pw-6b9d!"}
	source := "redis://user:" + secrets[5] + "@10.1.2.3:6379"
	var dbID, caID, userID int
	var taskID string
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		s := &clouddb.Subscription{AccountID: a.ID, Name: "s", Status: clouddb.SubscriptionActive}
		require.NoError(t, tx.CreateSubscription(ctx, s))
		d := &clouddb.Database{AccountID: a.ID, SubscriptionID: s.ID, Port: 10000, Password: secrets[0],
			Spec: clouddb.DatabaseSpec{Name: "d", PeriodicBackupPath: "s3://AKIA:" + secrets[6] + "@127.0.0.1:9000/b",
				RemoteBackup: &clouddb.RemoteBackup{Active: true, StorageType: "ftp", StoragePath: "ftp://u:" + secrets[7] + "@127.0.0.1/x"}}, ReplicaOf: []string{source}}
		require.NoError(t, tx.CreateDatabase(ctx, d))
		ca := &clouddb.CloudAccount{AccountID: a.ID, Name: "c", Provider: "AWS", AccessKeyID: secrets[1], AccessSecretKey: secrets[2], ConsolePassword: secrets[3]}
		require.NoError(t, tx.CreateCloudAccount(ctx, ca))
		tk := &clouddb.Task{AccountID: a.ID, CommandType: clouddb.CommandDatabaseCreate, Payload: []byte(`{"password":"` + secrets[4] + `"}`)}
		require.NoError(t, tx.CreateTask(ctx, tk))
		u := &clouddb.ACLUser{AccountID: a.ID, Name: "u", RoleID: 1, Password: secrets[8], Status: clouddb.ACLPending}
		require.NoError(t, tx.CreateACLUser(ctx, u))
		dbID, caID, taskID, userID = d.ID, ca.ID, tk.ID, u.ID
		return nil
	}))

	raw := rawConn(t, url)
	rows, err := raw.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "databases")
	var seen int
	for _, table := range tables {
		rows, err := raw.Query(ctx, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` AS t`)
		require.NoError(t, err)
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, row := range texts {
			seen++
			for _, s := range secrets {
				require.NotContains(t, row, s, "%s holds a secret in plain text", table)
				require.NotContains(t, row, hex.EncodeToString([]byte(s)), "%s holds a secret in plain bytes", table)
			}
		}
	}
	require.Positive(t, seen)

	require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
		d, err := tx.Database(ctx, 0, dbID)
		require.NoError(t, err)
		require.Equal(t, secrets[0], d.Password)
		require.Equal(t, "s3://AKIA:"+secrets[6]+"@127.0.0.1:9000/b", d.Spec.PeriodicBackupPath)
		require.Equal(t, "ftp://u:"+secrets[7]+"@127.0.0.1/x", d.Spec.RemoteBackup.StoragePath)
		require.Equal(t, []string{source}, d.ReplicaOf)
		ca, err := tx.CloudAccount(ctx, 0, caID)
		require.NoError(t, err)
		require.Equal(t, []string{secrets[1], secrets[2], secrets[3]}, []string{ca.AccessKeyID, ca.AccessSecretKey, ca.ConsolePassword})
		tk, err := tx.Task(ctx, 0, taskID)
		require.NoError(t, err)
		require.Contains(t, string(tk.Payload), secrets[4])
		u, err := tx.ACLUser(ctx, 0, userID)
		require.NoError(t, err)
		require.Equal(t, secrets[8], u.Password)
		return nil
	}))

	// The same store opened with another key cannot read the secrets: it fails loudly
	// instead of handing out garbage.
	other := mustOpen(t, url, postgres.WithCipher(testCipher(t)))
	viewErr := other.View(ctx, func(tx clouddb.Tx) error {
		_, err := tx.Database(ctx, 0, dbID)
		return err
	})
	require.ErrorIs(t, viewErr, clouddb.ErrSealed)
}

// TestNow: the times the store assigns are the clock's, in UTC, to the microsecond.
func TestNow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := mustOpen(t, pgtest.URL(t))
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_901_234, time.FixedZone("X", -3600))
	db.Now = func() time.Time { return at }

	a := &clouddb.Account{Name: "A", Plan: clouddb.PlanFlexible}
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error { return tx.CreateAccount(ctx, a) }))
	want := at.UTC().Truncate(time.Microsecond)
	require.Equal(t, want, a.CreatedAt, "timestamps are UTC, to the microsecond")
	require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
		got, err := tx.Account(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, want, got.CreatedAt)
		return nil
	}))
}

// TestIDs: a preset id moves the sequence past it, so generated ids never collide with
// it, and ids are not handed out again after a delete.
func TestIDs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := mustOpen(t, pgtest.URL(t))
	create := func(c *clouddb.CloudAccount) int {
		t.Helper()
		require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error { return tx.CreateCloudAccount(ctx, c) }))
		return c.ID
	}
	require.Equal(t, 50, create(&clouddb.CloudAccount{ID: 50, Name: "preset"}))
	require.Equal(t, 51, create(&clouddb.CloudAccount{Name: "next"}))
	require.Equal(t, 7, create(&clouddb.CloudAccount{ID: 7, Name: "lower"}))
	last := create(&clouddb.CloudAccount{Name: "after a lower preset"})
	require.Equal(t, 52, last, "a lower preset id does not move the sequence back")

	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error { return tx.DeleteCloudAccount(ctx, last) }))
	require.Equal(t, 53, create(&clouddb.CloudAccount{Name: "after a delete"}), "a deleted id is not reused")

	// A preset id that conflicts is refused, and the transaction with it.
	err := db.Update(ctx, func(tx clouddb.Tx) error { return tx.CreateCloudAccount(ctx, &clouddb.CloudAccount{ID: 50}) })
	require.ErrorIs(t, err, clouddb.ErrConflict)
}

// TestPayloadRoundTrip: a task's payload comes back as it was written, the empty and
// the missing ones included; so does its resource.
func TestPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, sealed := range []bool{false, true} {
		var opts []postgres.Option
		if sealed {
			opts = append(opts, postgres.WithCipher(testCipher(t)))
		}
		db := mustOpen(t, pgtest.URL(t), opts...)
		a := &clouddb.Account{Name: "A", Plan: clouddb.PlanFlexible}
		tasks := []*clouddb.Task{
			{Payload: nil},
			{Payload: []byte{}},
			{Payload: []byte(`{"name": "x", "n": [1, 2]}`), Status: clouddb.TaskCompleted, Resource: []byte(`{"b": 1,  "a": 2}`)},
		}
		require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateAccount(ctx, a))
			for _, tk := range tasks {
				tk.AccountID = a.ID
				require.NoError(t, tx.CreateTask(ctx, tk))
			}
			return nil
		}))
		require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
			for _, tk := range tasks {
				got, err := tx.Task(ctx, 0, tk.ID)
				require.NoError(t, err)
				require.Equal(t, tk, got, "sealed: %v", sealed)
			}
			return nil
		}))
	}
}

// TestTwoProcessesShareTheStore runs two stores on one database, as two replicas would.
// Their claims together keep the per-account rule and never hand a task out twice, and
// each sees the other's writes through Version and its change hook, but not its own.
func TestTwoProcessesShareTheStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	var hooks [2]atomic.Int64
	dbs := [2]*postgres.DB{
		mustOpen(t, url, postgres.WithChangeHook(func() { hooks[0].Add(1) })),
		mustOpen(t, url, postgres.WithChangeHook(func() { hooks[1].Add(1) })),
	}

	// Several accounts, their tasks interleaved in submission order.
	const accounts, perAccount = 5, 12
	submitted := map[int][]int64{}
	require.NoError(t, dbs[0].Update(ctx, func(tx clouddb.Tx) error {
		var ids []int
		for i := range accounts {
			a := &clouddb.Account{Name: fmt.Sprint("a", i), Plan: clouddb.PlanFlexible}
			require.NoError(t, tx.CreateAccount(ctx, a))
			ids = append(ids, a.ID)
		}
		for range perAccount {
			for _, id := range ids {
				tk := &clouddb.Task{AccountID: id, CommandType: clouddb.CommandDatabaseCreate, Payload: []byte(`{}`)}
				require.NoError(t, tx.CreateTask(ctx, tk))
				submitted[id] = append(submitted[id], tk.Seq)
			}
		}
		return nil
	}))

	var (
		mu        sync.Mutex
		processed = map[int][]int64{}
		claimed   = map[string]bool{}
		inflight  sync.Map // account id → *atomic.Int32
		finished  atomic.Int32
	)
	total := int32(accounts * perAccount)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i, db := range dbs {
		for w := range 3 {
			owner := fmt.Sprintf("replica%d-w%d", i, w)
			wg.Go(func() {
				for finished.Load() < total {
					if wctx.Err() != nil {
						t.Errorf("%s: stopped with %d of %d tasks finished", owner, finished.Load(), total)
						return
					}
					tk, err := db.ClaimTask(wctx, owner, time.Now(), time.Minute)
					if err != nil {
						t.Errorf("%s: claim: %v", owner, err)
						cancel()
						return
					}
					if tk == nil {
						time.Sleep(time.Millisecond)
						continue
					}
					n, _ := inflight.LoadOrStore(tk.AccountID, new(atomic.Int32))
					if c := n.(*atomic.Int32).Add(1); c != 1 {
						t.Errorf("account %d has %d tasks in progress", tk.AccountID, c)
					}
					mu.Lock()
					if claimed[tk.ID] {
						t.Errorf("task %s claimed twice", tk.ID)
					}
					claimed[tk.ID] = true
					processed[tk.AccountID] = append(processed[tk.AccountID], tk.Seq)
					mu.Unlock()
					time.Sleep(200 * time.Microsecond)
					n.(*atomic.Int32).Add(-1)

					tk.Status = clouddb.TaskCompleted
					if err := db.Update(wctx, func(tx clouddb.Tx) error { return tx.FinishTask(wctx, tk) }); err != nil {
						t.Errorf("%s: finish %s: %v", owner, tk.ID, err)
						cancel()
						return
					}
					finished.Add(1)
				}
			})
		}
	}
	wg.Wait()
	require.False(t, t.Failed())
	require.Equal(t, submitted, processed, "each account's tasks ran once each, in submission order")

	// A write through one replica reaches the other, and not its own hook. The
	// notifications of the claims above arrive first.
	settle(t, &hooks[0], &hooks[1])
	for i, db := range dbs {
		other := dbs[1-i]
		own, otherHook, otherVersion := hooks[i].Load(), hooks[1-i].Load(), other.Version()
		v := db.Version()
		require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
			return tx.CreateAccount(ctx, &clouddb.Account{Name: "x", Plan: clouddb.PlanFree})
		}))
		require.Greater(t, db.Version(), v, "a local write")
		require.Eventually(t, func() bool {
			return other.Version() > otherVersion && hooks[1-i].Load() > otherHook
		}, wait, time.Millisecond, "replica %d sees replica %d's write", 1-i, i)
		time.Sleep(100 * time.Millisecond) // the notification reaches both listeners alike
		require.Equal(t, own, hooks[i].Load(), "replica %d's own write does not call its hook", i)
	}

	// A claim, an extended lease and a purge are writes too.
	for _, write := range []func(db *postgres.DB){
		func(db *postgres.DB) {
			require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
				return tx.CreateTask(ctx, &clouddb.Task{ID: "t", AccountID: 1})
			}))
			tk, err := db.ClaimTask(ctx, "w", time.Now(), time.Minute)
			require.NoError(t, err)
			require.NotNil(t, tk)
		},
		func(db *postgres.DB) { require.NoError(t, db.ExtendLease(ctx, "t", "w", time.Now().Add(time.Hour))) },
		func(db *postgres.DB) {
			n, err := db.PurgeTasks(ctx, time.Now().Add(time.Hour))
			require.NoError(t, err)
			require.Positive(t, n)
		},
	} {
		v := dbs[1].Version()
		write(dbs[0])
		require.Eventually(t, func() bool { return dbs[1].Version() > v }, wait, time.Millisecond)
	}
}

// settle waits until the counters have stayed the same for a moment.
func settle(t *testing.T, counters ...*atomic.Int64) {
	t.Helper()
	sum := func() (n int64) {
		for _, c := range counters {
			n += c.Load()
		}
		return n
	}
	deadline := time.Now().Add(wait)
	for last := sum(); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		n := sum()
		if n == last {
			return
		}
		last = n
	}
	t.Fatal("the counters did not settle")
}

// TestListenerReconnects: when the listening connection breaks, the store connects
// again, counts the writes it may have missed as a change, and goes on hearing the
// other replica's writes.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	var hook atomic.Int64
	writer := mustOpen(t, url)
	db := mustOpen(t, url, postgres.WithChangeHook(func() { hook.Add(1) }))

	v, h := db.Version(), hook.Load()
	raw := rawConn(t, url)
	var killed int
	require.NoError(t, raw.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'clouddb-listener'`).Scan(&killed))
	require.Equal(t, 2, killed, "each store listens on a connection of its own")
	require.Eventually(t, func() bool { return db.Version() > v && hook.Load() > h }, wait, time.Millisecond,
		"a reconnect counts as a change")

	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'clouddb-listener'`).Scan(&n))
		return n == 2
	}, wait, 10*time.Millisecond)
	v, h = db.Version(), hook.Load()
	require.NoError(t, writer.Update(ctx, func(tx clouddb.Tx) error {
		return tx.CreateAccount(ctx, &clouddb.Account{Name: "x", Plan: clouddb.PlanFree})
	}))
	require.Eventually(t, func() bool { return db.Version() > v && hook.Load() > h }, wait, time.Millisecond)
}

// leadResult is what a Lead running in a goroutine returned.
type leadResult struct {
	lost    <-chan struct{}
	release func()
	err     error
}

func goLead(ctx context.Context, db *postgres.DB, name string) <-chan leadResult {
	ch := make(chan leadResult, 1)
	go func() {
		lost, release, err := db.Lead(ctx, name)
		ch <- leadResult{lost, release, err}
	}()
	return ch
}

// TestLead: one holder of a named lock among the stores sharing a database; a waiter
// takes it over when the holder releases it or the holder's connection dies.
func TestLead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	db1, db2 := mustOpen(t, url), mustOpen(t, url)

	lost1, release1, err := db1.Lead(ctx, "workers")
	require.NoError(t, err)

	// A waiter whose context ends gives up with the context's error.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, _, err = db2.Lead(short, "workers")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// It leaves no session behind in the lock's queue, ahead of the next waiters.
	raw := rawConn(t, url)
	require.Eventually(t, func() bool {
		var waiting int
		// Only Lead's locks (two-key, objsubid 2) of this test's database: other tests'
		// writers may be queued for their own write locks meanwhile.
		require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting))
		return waiting == 0
	}, wait, 10*time.Millisecond)

	// Another name is another lock.
	_, releaseOther, err := db2.Lead(ctx, "other")
	require.NoError(t, err)
	releaseOther()

	// A waiter gets the lock when the holder releases it, not before.
	waiter := goLead(ctx, db2, "workers")
	select {
	case r := <-waiter:
		t.Fatalf("Lead returned while another held the lock: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	release1()
	release1() // a second release does nothing
	var r leadResult
	select {
	case r = <-waiter:
		require.NoError(t, r.err)
	case <-time.After(wait):
		t.Fatal("the waiter did not get the released lock")
	}
	select {
	case <-lost1:
		t.Fatal("a release is not a loss")
	default:
	}
	lost2, release2 := r.lost, r.release

	// The holder's connection dies: it learns it lost the lock, and the waiter takes it.
	waiter = goLead(ctx, db1, "workers")
	var killed int
	require.NoError(t, raw.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed))
	require.Equal(t, 1, killed)
	select {
	case <-lost2:
	case <-time.After(wait):
		t.Fatal("lost was not closed when the holder's connection died")
	}
	release2() // safe after a loss
	select {
	case r = <-waiter:
		require.NoError(t, r.err)
	case <-time.After(wait):
		t.Fatal("the waiter did not get the lock of a dead holder")
	}

	// Closing the store ends its hold: lost closes, and the lock is free for another.
	waiter = goLead(ctx, db2, "workers")
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, db1.Close())
	select {
	case <-r.lost:
	case <-time.After(wait):
		t.Fatal("closing the store did not end its hold")
	}
	r.release() // safe after Close
	select {
	case r = <-waiter:
		require.NoError(t, r.err)
		r.release()
	case <-time.After(wait):
		t.Fatal("the waiter did not get the lock of a closed store")
	}
	_, _, err = db1.Lead(ctx, "workers")
	require.Error(t, err, "a closed store leads nothing")
}

// TestCloseWhileWaiting: Close ends a Lead still waiting for its lock, with an error.
func TestCloseWhileWaiting(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	holder := mustOpen(t, url)
	_, release, err := holder.Lead(t.Context(), "workers")
	require.NoError(t, err)
	defer release()

	db, err := postgres.Open(t.Context(), url)
	require.NoError(t, err)
	waiter := goLead(context.Background(), db, "workers")
	time.Sleep(100 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case r := <-waiter:
		require.Error(t, r.err)
	case <-time.After(wait):
		t.Fatal("Close did not end a waiting Lead")
	}
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("Close did not return")
	}
}

// TestMigrationsConcurrent: replicas that start at once on a new database all open it,
// and each migration is applied once.
func TestMigrationsConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	const replicas = 6
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() {
			db, err := postgres.Open(ctx, url)
			if err == nil {
				err = db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	raw := rawConn(t, url)
	applied := func() map[string]time.Time {
		rows, err := raw.Query(ctx, `SELECT name, applied_at FROM schema_migrations`)
		require.NoError(t, err)
		m := map[string]time.Time{}
		for rows.Next() {
			var name string
			var at time.Time
			require.NoError(t, rows.Scan(&name, &at))
			require.NotContains(t, m, name)
			m[name] = at
		}
		require.NoError(t, rows.Err())
		return m
	}
	first := applied()
	require.Contains(t, first, "migration/0001_init.sql")
	for name := range first {
		require.True(t, strings.HasPrefix(name, "migration/"), name)
	}

	db := mustOpen(t, url)
	require.Equal(t, first, applied(), "reopening applies no migration again")
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		return tx.CreateAccount(ctx, &clouddb.Account{Name: "A", Plan: clouddb.PlanFlexible})
	}))
}

// TestCloseLeaksNothing: a store that listened, led and was closed leaves no goroutine
// behind. It runs alone (not parallel), so that the count is its own.
func TestCloseLeaksNothing(t *testing.T) {
	url := pgtest.URL(t)
	before := runtime.NumGoroutine()
	db, err := postgres.Open(t.Context(), url, postgres.WithChangeHook(func() {}))
	require.NoError(t, err)
	_, _, err = db.Lead(t.Context(), "workers")
	require.NoError(t, err)
	require.NoError(t, db.Update(t.Context(), func(tx clouddb.Tx) error {
		return tx.CreateAccount(t.Context(), &clouddb.Account{Name: "A", Plan: clouddb.PlanFlexible})
	}))
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "Close twice is harmless")
	// Polled here, not with require.Eventually, whose own goroutines would count.
	deadline := time.Now().Add(wait)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before Open, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestBrokenConnections: after the server ended every session (a restart, a failover),
// the pooled connections are dead; reads and writes still succeed on fresh ones instead
// of failing once per dead connection.
func TestBrokenConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	db := mustOpen(t, url)
	// Fill the pool with idle connections: a few parallel reads.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
				_, err := tx.Accounts(ctx)
				time.Sleep(50 * time.Millisecond)
				return err
			}))
		})
	}
	wg.Wait()

	raw := rawConn(t, url)
	var killed int
	require.NoError(t, raw.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> 'clouddb-listener'`).Scan(&killed))
	require.GreaterOrEqual(t, killed, 2, "the pool held several connections")

	for i := range 4 {
		require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error { _, err := tx.Accounts(ctx); return err }), "read %d", i)
	}
	for i := range 4 {
		require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
			return tx.CreateAccount(ctx, &clouddb.Account{Name: fmt.Sprintf("after-%d", i), Plan: clouddb.PlanFree})
		}), "write %d", i)
	}
	require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
		as, err := tx.Accounts(ctx)
		require.Len(t, as, 4, "each write committed once")
		return err
	}))
}

// TestUnavailable: while the database takes no connections, reads and writes fail with
// clouddb.ErrUnavailable (a 503 for clients, a retry later for the task engine), after a
// few tries; once it is back they succeed again.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	db := mustOpen(t, url)
	// A database's connections are switched off from another one: the server's own.
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	raw := rawConn(t, u.String())
	_, err = raw.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS false`)
	require.NoError(t, err)
	_, err = raw.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name)
	require.NoError(t, err)

	err = db.View(ctx, func(tx clouddb.Tx) error { _, accountsErr := tx.Accounts(ctx); return accountsErr })
	require.ErrorIs(t, err, clouddb.ErrUnavailable)
	require.Equal(t, http.StatusServiceUnavailable, clouddb.AsError(err).Status)
	err = db.Update(ctx, func(tx clouddb.Tx) error {
		return tx.CreateAccount(ctx, &clouddb.Account{Name: "x", Plan: clouddb.PlanFree})
	})
	require.ErrorIs(t, err, clouddb.ErrUnavailable)
	_, err = db.ClaimTask(ctx, "w", time.Now(), time.Minute)
	require.ErrorIs(t, err, clouddb.ErrUnavailable)

	_, err = raw.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS true`)
	require.NoError(t, err)
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		return tx.CreateAccount(ctx, &clouddb.Account{Name: "x", Plan: clouddb.PlanFree})
	}))
}

// TestViewRetriedMidRead: a read whose connection the server ends while fn runs is run
// again, whole, on a fresh connection; fn sees a clean transaction the second time.
func TestViewRetriedMidRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	db := mustOpen(t, url)
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		return tx.CreateAccount(ctx, &clouddb.Account{Name: "a", Plan: clouddb.PlanFree})
	}))
	raw := rawConn(t, url)
	calls := 0
	var got []*clouddb.Account
	require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
		calls++
		if calls == 1 {
			_, err := raw.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> 'clouddb-listener'`)
			require.NoError(t, err)
		}
		var err error
		got, err = tx.Accounts(ctx)
		return err
	}))
	require.Equal(t, 2, calls, "the broken read ran again")
	require.Len(t, got, 1)
}
