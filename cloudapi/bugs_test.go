package cloudapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// A JSON null is not a request object, like an array or a string, and must get the same
// 400 without a task. decodeBody (cloudapi/server.go) decodes null into the request
// struct as a no-op, so null is accepted as {}: POST /subscriptions enqueues a doomed
// task, and PUT /subscriptions/{id} enqueues an empty update that completes and moves the
// subscription to pending.
func TestNullBodyIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID, dbID := e.activeSubscription("target")
	caID := e.createCloudAccount(e.main, "target")
	before := e.counts(e.mainAccount)
	for _, r := range []route{
		{http.MethodPost, "/v1/subscriptions", nil},
		{http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d", subID), nil},
		{http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases", subID), nil},
		{http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID), nil},
		{http.MethodPost, "/v1/cloud-accounts", nil},
		{http.MethodPut, fmt.Sprintf("/v1/cloud-accounts/%d", caID), nil},
	} {
		res := e.do(r.method, r.path, mainKey, mainSecret, []byte("null"))
		requireError(t, res, http.StatusBadRequest, "MALFORMED_BODY")
	}
	require.Equal(t, before, e.counts(e.mainAccount))
	s, err := e.main.GetSubscription(testCtx(t), subID)
	require.NoError(t, err)
	require.Equal(t, client.SubscriptionActive, s.Status)
}
