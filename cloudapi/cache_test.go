package cloudapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
)

// TestCachedReadsFollowWrites: GET answers are served from memory, yet every write, by a
// task or by the provisioning phase, shows in the next read.
func TestCachedReadsFollowWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("cached")
	for range 3 { // fill the cache
		db, err := e.main.GetDatabase(ctx, subID, dbID)
		require.NoError(t, err)
		require.Equal(t, "pending", db.Status)
	}

	// A write outside any task, as the provisioning phase makes.
	require.NoError(t, e.store.Update(context.Background(), func(tx clouddb.Tx) error {
		d, err := tx.Database(context.Background(), 0, dbID)
		require.NoError(t, err)
		_, err = tx.SetDatabaseStatus(context.Background(), dbID, d.Generation, clouddb.DatabaseActive, "")
		return err
	}))
	db, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, "active", db.Status)

	// A write by a task.
	_, err = e.main.Wait(ctx)(e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{Name: client.Ptr("renamed")}))
	require.NoError(t, err)
	db, err = e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, "renamed", db.Name)

	// Another account never gets this account's cached answer.
	_, err = e.other.GetDatabase(ctx, subID, dbID)
	require.True(t, client.IsNotFound(err), "%v", err)
}
