package task

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// budgetFixture is a store with one account and an active subscription, and an engine
// that keeps 1 GiB for the databases.
func budgetFixture(t *testing.T) (context.Context, *sqlite.DB, *Engine, *clouddb.Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	sub := &clouddb.Subscription{Name: "s", Status: clouddb.SubscriptionActive, CapacityGB: 100}
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		if err := tx.CreateAccount(ctx, a); err != nil {
			return err
		}
		sub.AccountID = a.ID
		return tx.CreateSubscription(ctx, sub)
	}))
	low := 42000
	e := &Engine{Store: store, Ports: &Ports{Low: low, High: low + 999, Host: "127.0.0.1"}, MemoryLimit: 1 << 30}
	e.init()
	return ctx, store, e, sub
}

// createMinimal submits a database create of the smallest size and processes it; it
// returns the finished task.
func createMinimal(t *testing.T, ctx context.Context, store *sqlite.DB, e *Engine, sub *clouddb.Subscription, name string) *clouddb.Task {
	t.Helper()
	payload, err := json.Marshal(clouddb.DatabaseSpec{Name: name, DatasetSizeInGB: clouddb.MinDatabaseSizeGB, Password: "pw"})
	require.NoError(t, err)
	tk := &clouddb.Task{AccountID: sub.AccountID, SubscriptionID: sub.ID, CommandType: clouddb.CommandDatabaseCreate, Payload: payload}
	require.NoError(t, e.Submit(ctx, tk))
	did, err := e.ProcessNext(ctx)
	require.NoError(t, err)
	require.True(t, did)
	var got *clouddb.Task
	require.NoError(t, store.View(ctx, func(tx clouddb.Tx) error {
		got, err = tx.Task(ctx, sub.AccountID, tk.ID)
		return err
	}))
	require.True(t, got.Status.Final(), "task %s is %s", name, got.Status)
	return got
}

// TestMemoryBudgetFloodStops: a flood of databases of the smallest size stops at the
// budget: each counts its 0.1 GB maxmemory and its server's 12 MiB (114.4 MiB), so under
// 1 GiB eight fit and every one after fails its task.
func TestMemoryBudgetFloodStops(t *testing.T) {
	ctx, store, e, sub := budgetFixture(t)
	made := 0
	for i := range 15 {
		got := createMinimal(t, ctx, store, e, sub, "flood-"+strconv.Itoa(i))
		if got.Status == clouddb.TaskCompleted {
			made++
			continue
		}
		require.Equal(t, clouddb.ErrTypeNoMemory, got.Error.Type, "task %d: %+v", i, got.Error)
	}
	require.Equal(t, 8, made, "int(1024 MiB / 114.4 MiB) databases fit")
}

// TestMemoryBudgetCountsFootprint: a database costs at least its server's footprint, so
// databases stored with a size near 0 (written before the size floor) still fill the
// budget: 90 of them take 1080 MiB of a 1 GiB budget, and no database fits any more (the
// smallest needs 0.1 GB and 12 MiB).
func TestMemoryBudgetCountsFootprint(t *testing.T) {
	ctx, store, e, sub := budgetFixture(t)
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		for i := range 90 {
			d := &clouddb.Database{AccountID: sub.AccountID, SubscriptionID: sub.ID, Status: clouddb.DatabaseActive, Port: 30000 + i,
				Spec: clouddb.DatabaseSpec{Name: "old-" + strconv.Itoa(i), DatasetSizeInGB: 1e-10}}
			if err := tx.CreateDatabase(ctx, d); err != nil {
				return err
			}
		}
		return nil
	}))
	got := createMinimal(t, ctx, store, e, sub, "one-more")
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, clouddb.ErrTypeNoMemory, got.Error.Type)
	require.Equal(t, "database: this host keeps 1 GB of memory for databases (--db-memory), 1.055 GB of it is taken, and this database needs 0.112 GB",
		got.Error.Description)
}
