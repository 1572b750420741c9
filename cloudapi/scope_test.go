package cloudapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// Another account's subscription, database, cloud account and task ids answer 404, on
// every method, exactly as ids that do not exist; nothing is enqueued for either account
// and the resources are unchanged.
func TestForeignIDsAreNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("mine")
	caID := e.createCloudAccount(e.main, "mine")
	tasks, err := e.main.ListTasks(ctx)
	require.NoError(t, err)
	// The other account has a subscription of its own, to name main's database in.
	otherSub := e.createSubscription(e.other, e.otherPM, "theirs")
	mainBefore := e.counts(e.mainAccount)
	otherBefore := e.counts(e.otherAccount)
	dbBefore, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)

	wantType := func(path string) string {
		switch {
		case strings.HasPrefix(path, "/v1/tasks/"):
			return "TASK_NOT_FOUND"
		case strings.HasPrefix(path, "/v1/cloud-accounts/"):
			return "CLOUD_ACCOUNT_NOT_FOUND"
		}
		return "SUBSCRIPTION_NOT_FOUND"
	}
	foreign := ids{subID, dbID, caID, tasks[0].ID}
	missing := ids{subID + 1000, dbID + 1000, caID + 1000, "00000000-0000-0000-0000-000000000000"}
	for _, id := range []ids{foreign, missing} {
		for _, r := range routes(id) {
			if !r.named() {
				continue
			}
			res := e.do(r.method, r.path, otherKey, otherSecret, r.body)
			requireError(t, res, http.StatusNotFound, wantType(r.path))
		}
	}
	// Main's database named under the other account's own subscription.
	for _, r := range routes(ids{otherSub, dbID, 0, ""}) {
		if strings.Contains(r.path, "/databases/") {
			res := e.do(r.method, r.path, otherKey, otherSecret, r.body)
			requireError(t, res, http.StatusNotFound, "DATABASE_NOT_FOUND")
		}
	}
	// redis-versions names a subscription in its query.
	res := e.do(http.MethodGet, fmt.Sprintf("/v1/subscriptions/redis-versions?subscriptionId=%d", subID), otherKey, otherSecret, nil)
	requireError(t, res, http.StatusNotFound, "SUBSCRIPTION_NOT_FOUND")

	require.Equal(t, mainBefore, e.counts(e.mainAccount))
	require.Equal(t, otherBefore, e.counts(e.otherAccount))
	dbAfter, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, dbBefore, dbAfter)
}

// The client maps a 404 to IsNotFound, which is what Terraform's read and delete flows
// rely on.
func TestClientNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID := e.createSubscription(e.main, e.mainPM, "mine")
	_, err := e.other.GetSubscription(ctx, subID)
	require.True(t, client.IsNotFound(err), "%v", err)
	_, err = e.other.GetDatabase(ctx, subID, 1)
	require.True(t, client.IsNotFound(err), "%v", err)
	_, err = e.other.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("x"), MemoryLimitInGB: client.Ptr(1.0), Password: client.Ptr("p")})
	require.True(t, client.IsNotFound(err), "%v", err)
	_, err = e.other.GetCloudAccount(ctx, 424242)
	require.True(t, client.IsNotFound(err), "%v", err)
	_, err = e.other.GetTask(ctx, "nope")
	require.True(t, client.IsNotFound(err), "%v", err)
}
