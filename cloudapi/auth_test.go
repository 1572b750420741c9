package cloudapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// route is one request to an endpoint cloudapi registers.
type route struct {
	method, path string
	body         []byte
}

func (r route) String() string { return r.method + " " + r.path }

// named reports whether the route names a resource by id (account-wide ones do not).
func (r route) named() bool {
	for _, p := range []string{"/v1/subscriptions/", "/v1/cloud-accounts/", "/v1/tasks/"} {
		if strings.HasPrefix(r.path, p) && r.path != "/v1/subscriptions/redis-versions" {
			return true
		}
	}
	return false
}

// ids names existing (or, for other accounts, foreign) resources to put in paths.
type ids struct {
	sub, db, cloudAccount int
	task                  string
}

// routes lists every authenticated endpoint cloudapi registers, with a body for those
// that take one.
func routes(id ids) []route {
	obj := []byte(`{}`)
	sub := fmt.Sprintf("/v1/subscriptions/%d", id.sub)
	db := fmt.Sprintf("%s/databases/%d", sub, id.db)
	ca := fmt.Sprintf("/v1/cloud-accounts/%d", id.cloudAccount)
	return []route{
		{http.MethodGet, "/v1", nil},
		{http.MethodGet, "/v1/payment-methods", nil},
		{http.MethodGet, "/v1/regions", nil},
		{http.MethodGet, "/v1/data-persistence", nil},
		{http.MethodGet, "/v1/database-modules", nil},
		{http.MethodGet, "/v1/cloud-accounts", nil},
		{http.MethodPost, "/v1/cloud-accounts", obj},
		{http.MethodGet, ca, nil},
		{http.MethodPut, ca, obj},
		{http.MethodDelete, ca, nil},
		{http.MethodGet, "/v1/subscriptions", nil},
		{http.MethodPost, "/v1/subscriptions", obj},
		{http.MethodGet, "/v1/subscriptions/redis-versions", nil},
		{http.MethodGet, sub, nil},
		{http.MethodPut, sub, obj},
		{http.MethodDelete, sub, nil},
		{http.MethodGet, sub + "/maintenance-windows", nil},
		{http.MethodGet, sub + "/pricing", nil},
		{http.MethodGet, sub + "/databases", nil},
		{http.MethodPost, sub + "/databases", obj},
		{http.MethodGet, db, nil},
		{http.MethodPut, db, obj},
		{http.MethodDelete, db, nil},
		{http.MethodGet, db + "/tags", nil},
		{http.MethodPut, db + "/tags", []byte(`{"tags":[]}`)},
		{http.MethodPost, db + "/backup", nil},
		{http.MethodGet, db + "/backup", nil},
		{http.MethodPost, db + "/import", []byte(`{"sourceType":"http","importFromUri":["http://example.com/x.rdb"]}`)},
		{http.MethodGet, db + "/import", nil},
		{http.MethodGet, "/v1/tasks", nil},
		{http.MethodGet, "/v1/tasks/" + id.task, nil},
		{http.MethodGet, "/v1/logs", nil},
	}
}

// Missing, unknown or wrong credentials get 401 with a JSON error on every endpoint; an
// unknown key and a wrong secret get the very same body, so a caller cannot probe for
// keys; and nothing is enqueued.
func TestAuthenticationFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.counts(e.mainAccount)
	cases := []struct{ name, key, secret string }{
		{"missing key", "", mainSecret},
		{"missing secret", mainKey, ""},
		{"missing both", "", ""},
		{"unknown key", "no-such-key", mainSecret},
		{"wrong secret", mainKey, "wrong-secret"},
		{"other account's secret", mainKey, otherSecret},
	}
	bodies := map[string]string{}
	for _, c := range cases {
		for _, r := range routes(ids{1, 1, 1, "x"}) {
			res := e.do(r.method, r.path, c.key, c.secret, r.body)
			requireError(t, res, http.StatusUnauthorized, "UNAUTHORIZED")
			if r.method == http.MethodGet && r.path == "/v1/subscriptions" {
				bodies[c.name] = string(res.body)
			}
		}
	}
	require.Equal(t, bodies["unknown key"], bodies["wrong secret"])
	require.Equal(t, bodies["unknown key"], bodies["missing key"])
	require.Equal(t, before, e.counts(e.mainAccount))
}

// Accounts on the fixed and free plans are refused on every call with a 403 that says
// the API is for the flexible and annual plans; the annual account is served.
func TestPlansWithoutAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, k := range [][2]string{{fixedKey, fixedSecret}, {freeKey, freeSecret}} {
		for _, r := range routes(ids{1, 1, 1, "x"}) {
			res := e.do(r.method, r.path, k[0], k[1], r.body)
			ae := requireError(t, res, http.StatusForbidden, "PLAN_NOT_SUPPORTED")
			require.Contains(t, ae.Error.Description, "flexible and annual plans", "%s %s", k[0], r)
		}
	}
	_, err := e.other.ListSubscriptions(testCtx(t))
	require.NoError(t, err)
	_, err = e.fixed.ListSubscriptions(testCtx(t))
	requireClientError(t, err, http.StatusForbidden, "PLAN_NOT_SUPPORTED")
}

// A viewer key reads everything (200) and changes nothing (403 on every POST, PUT and
// DELETE, before any task is created). Reading the latest backup or import status is a
// read: like the real API it answers with a task, the only thing a viewer makes.
func TestViewerKeyIsReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("viewed")
	caID := e.createCloudAccount(e.main, "viewed")
	tasks, err := e.main.ListTasks(ctx)
	require.NoError(t, err)
	before := e.counts(e.mainAccount)

	statusTasks := 0
	for _, r := range routes(ids{subID, dbID, caID, tasks[0].ID}) {
		res := e.do(r.method, r.path, viewerKey, viewerSecret, r.body)
		switch {
		case r.method != http.MethodGet:
			ae := requireError(t, res, http.StatusForbidden, "FORBIDDEN")
			require.Contains(t, ae.Error.Description, "read-only", r.String())
		case r.path == fmt.Sprintf("/v1/subscriptions/%d/databases/%d/backup", subID, dbID),
			r.path == fmt.Sprintf("/v1/subscriptions/%d/databases/%d/import", subID, dbID):
			require.Equal(t, http.StatusOK, res.status, "%s: %s", r, res.body)
			require.Contains(t, string(res.body), `"status":"received"`, r.String())
			statusTasks++
		default:
			require.Equal(t, http.StatusOK, res.status, "%s: %s", r, res.body)
		}
	}
	require.Equal(t, 2, statusTasks)
	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+statusTasks, after.tasks)
	after.tasks = before.tasks
	require.Equal(t, before, after)
}
