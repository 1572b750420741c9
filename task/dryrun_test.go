package task

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// runTask submits a task with the payload and processes it; it returns the finished task.
func runTask(t *testing.T, ctx context.Context, store *sqlite.DB, e *Engine, tk *clouddb.Task, payload any) *clouddb.Task {
	t.Helper()
	var err error
	tk.Payload, err = json.Marshal(payload)
	require.NoError(t, err)
	require.NoError(t, e.Submit(ctx, tk))
	did, err := e.ProcessNext(ctx)
	require.NoError(t, err)
	require.True(t, did)
	var got *clouddb.Task
	require.NoError(t, store.View(ctx, func(tx clouddb.Tx) error {
		got, err = tx.Task(ctx, tk.AccountID, tk.ID)
		return err
	}))
	require.True(t, got.Status.Final())
	return got
}

// A dry run fails where the real request would for want of memory or of the port asked
// for, and otherwise holds nothing: the port it found is still free for a real create.
func TestDryRunChecksMemoryAndPorts(t *testing.T) {
	ctx, store, e, sub := budgetFixture(t)
	create := func(spec clouddb.DatabaseSpec) *clouddb.Task {
		return runTask(t, ctx, store, e, &clouddb.Task{AccountID: sub.AccountID, SubscriptionID: sub.ID, CommandType: clouddb.CommandDatabaseCreate}, spec)
	}
	dry := func(name string, gb float64, port int) clouddb.DatabaseSpec {
		return clouddb.DatabaseSpec{DryRun: true, Name: name, MemoryLimitInGB: gb, Password: "pw", Port: port}
	}

	got := create(dry("big", 2, 0))
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, clouddb.ErrTypeNoMemory, got.Error.Type)

	got = create(dry("far", 0.1, 80))
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Contains(t, got.Error.Description, "port 80 is outside the range")

	got = create(dry("fits", 0.5, 42001))
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
	require.Zero(t, got.ResourceID)
	require.JSONEq(t, `{"pricing":[{"databaseName":"fits","type":"Shards","typeDetails":"standard","quantity":1,"quantityMeasurement":"shards","pricePerUnit":0,"priceCurrency":"USD","pricePeriod":"hour"}]}`, string(got.Resource))

	// Nothing was reserved: the real create gets that very port, and the memory.
	made := create(clouddb.DatabaseSpec{Name: "fits", MemoryLimitInGB: 0.5, Password: "pw", Port: 42001})
	require.Equal(t, clouddb.TaskCompleted, made.Status, "%+v", made.Error)
	got = create(dry("again", 0.1, 42001))
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, "DATABASE_PORT_IN_USE", got.Error.Type)
	got = create(dry("more", 0.6, 0))
	require.Equal(t, clouddb.TaskFailed, got.Status, "0.5 + 0.6 GB is past the 1 GiB budget")
	require.Equal(t, clouddb.ErrTypeNoMemory, got.Error.Type)
}

// A dry run of a subscription checks its creation plan as a whole: the databases must fit
// the memory together, and a port asked for twice is refused, as the real create would.
func TestDryRunSubscriptionPlan(t *testing.T) {
	ctx, store, e, sub := budgetFixture(t)
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		return tx.CreateCloudAccount(ctx, &clouddb.CloudAccount{ID: clouddb.InternalCloudAccountID, Name: "internal", Provider: "AWS", Status: clouddb.CloudAccountActive})
	}))
	plan := func(dbs ...clouddb.DatabaseSpec) clouddb.SubscriptionSpec {
		return clouddb.SubscriptionSpec{Name: "dry", DryRun: true, PaymentMethod: "marketplace",
			CloudProviders: []clouddb.CloudProvider{{CloudAccountID: clouddb.InternalCloudAccountID, Regions: []clouddb.Region{{Region: "us-east-1"}}}},
			Databases:      dbs}
	}
	submit := func(spec clouddb.SubscriptionSpec) *clouddb.Task {
		return runTask(t, ctx, store, e, &clouddb.Task{AccountID: sub.AccountID, CommandType: clouddb.CommandSubscriptionCreate}, spec)
	}

	got := submit(plan(clouddb.DatabaseSpec{Name: "a", MemoryLimitInGB: 0.4, Quantity: 3}))
	require.Equal(t, clouddb.TaskFailed, got.Status, "3 × 0.4 GB do not fit 1 GiB together")
	require.Equal(t, clouddb.ErrTypeNoMemory, got.Error.Type)

	got = submit(plan(clouddb.DatabaseSpec{Name: "a", MemoryLimitInGB: 0.1, Port: 42005, Quantity: 2}))
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, "DATABASE_PORT_IN_USE", got.Error.Type)

	got = submit(plan(clouddb.DatabaseSpec{Name: "a", MemoryLimitInGB: 0.1, Quantity: 2}, clouddb.DatabaseSpec{Name: "b", MemoryLimitInGB: 0.2}))
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
	require.Zero(t, got.ResourceID)
	var res struct {
		Pricing []struct {
			DatabaseName string `json:"databaseName"`
		} `json:"pricing"`
	}
	require.NoError(t, json.Unmarshal(got.Resource, &res))
	require.Len(t, res.Pricing, 3)
	require.Equal(t, []string{"a", "a-2", "b"}, []string{res.Pricing[0].DatabaseName, res.Pricing[1].DatabaseName, res.Pricing[2].DatabaseName})
	require.NoError(t, store.View(ctx, func(tx clouddb.Tx) error {
		subs, err := tx.Subscriptions(ctx, clouddb.SubscriptionFilter{AccountID: sub.AccountID})
		require.Len(t, subs, 1, "only the fixture's")
		return err
	}))
}
