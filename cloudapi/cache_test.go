package cloudapi_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi"
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

// TestCacheBoundedByBytes: a flood of distinct, large query strings keeps the answer cache
// within its byte budget, the answer read between them (the hot one) stays cached, and an
// answer larger than the per-entry cap is not cached at all.
func TestCacheBoundedByBytes(t *testing.T) {
	t.Parallel()
	const budget, entryMax = 256 << 10, 64 << 10
	var api *cloudapi.Server
	e := newEnv(t, cloudapi.LimitCache(budget, entryMax), func(s *cloudapi.Server) { api = s })
	subID, _ := e.activeSubscription("hot")
	hot := fmt.Sprintf("/v1/subscriptions/%d", subID)
	for i := range 100 {
		junk := fmt.Sprintf("?junk=%d-%s", i, strings.Repeat("x", 8<<10))
		r := e.do("GET", "/v1/subscriptions"+junk, mainKey, mainSecret, nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		require.Equal(t, 200, e.do("GET", hot, mainKey, mainSecret, nil).status)
		_, bytes := cloudapi.CacheSize(api)
		require.LessOrEqual(t, bytes, int64(budget), "after %d distinct queries", i+1)
	}
	entries, bytes := cloudapi.CacheSize(api)
	require.Less(t, entries, 100, "old answers were evicted")
	require.Greater(t, bytes, int64(budget/2), "the budget is used, not wasted")
	require.True(t, cloudapi.Cached(api, hot+"?"), "the hot answer survived the flood")

	huge := "?junk=" + strings.Repeat("y", entryMax)
	require.Equal(t, 200, e.do("GET", "/v1/subscriptions"+huge, mainKey, mainSecret, nil).status)
	require.False(t, cloudapi.Cached(api, huge), "an entry whose key passes the per-entry cap is not cached")
}

// viewCounter counts the store's read transactions.
type viewCounter struct {
	clouddb.Store
	views atomic.Int64
}

func (v *viewCounter) View(ctx context.Context, fn func(clouddb.Tx) error) error {
	v.views.Add(1)
	return v.Store.View(ctx, fn)
}

// TestCacheEvictsLeastRecentlyUsed: while a flood of distinct answers passes through the
// cache many times over its budget, an answer read between them is never evicted: each of
// its reads is served without reading the store.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	const budget, entryMax = 64 << 10, 16 << 10
	counter := &viewCounter{}
	now := time.Now().UTC()
	e := newEnv(t, cloudapi.LimitCache(budget, entryMax), func(s *cloudapi.Server) {
		counter.Store = s.Store
		s.Store = counter
		s.Now = func() time.Time { return now } // the key cache never expires
	})
	subID, _ := e.activeSubscription("hot")
	hot := fmt.Sprintf("/v1/subscriptions/%d", subID)
	require.Equal(t, 200, e.do("GET", hot, mainKey, mainSecret, nil).status)
	for i := range 100 {
		junk := fmt.Sprintf("?junk=%d-%s", i, strings.Repeat("x", 4<<10))
		require.Equal(t, 200, e.do("GET", "/v1/subscriptions"+junk, mainKey, mainSecret, nil).status)
		before := counter.views.Load()
		require.Equal(t, 200, e.do("GET", hot, mainKey, mainSecret, nil).status)
		require.Equal(t, before, counter.views.Load(), "the hot answer was evicted after %d distinct queries", i+1)
	}
}

// TestLargeAnswerNotCached: an answer whose body alone passes the per-entry cap is not
// cached, under a short key; a smaller one is.
func TestLargeAnswerNotCached(t *testing.T) {
	t.Parallel()
	const entryMax = 2 << 10
	var api *cloudapi.Server
	e := newEnv(t, cloudapi.LimitCache(256<<10, entryMax), func(s *cloudapi.Server) { api = s })
	var one int
	for i := range 6 {
		one, _ = e.activeSubscription(fmt.Sprintf("large-%d", i))
	}
	list := e.do("GET", "/v1/subscriptions", mainKey, mainSecret, nil)
	require.Equal(t, 200, list.status)
	require.Greater(t, len(list.body), entryMax, "the list must pass the cap for the test to mean anything")
	single := e.do("GET", fmt.Sprintf("/v1/subscriptions/%d", one), mainKey, mainSecret, nil)
	require.Equal(t, 200, single.status)
	require.Less(t, len(single.body), entryMax/2)
	require.False(t, cloudapi.Cached(api, "/v1/subscriptions?"), "an answer over the per-entry cap is not cached")
	require.True(t, cloudapi.Cached(api, fmt.Sprintf("/v1/subscriptions/%d?", one)))
}
