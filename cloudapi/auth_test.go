package cloudapi_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi"
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
		{http.MethodPut, sub + "/maintenance-windows", []byte(`{"mode":"automatic"}`)},
		{http.MethodPut, sub + "/resource-tags", []byte(`{"resourceTags":[]}`)},
		{http.MethodGet, sub + "/cidr", nil},
		{http.MethodPut, sub + "/cidr", obj},
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
		{http.MethodPost, db + "/upgrade", []byte(`{"targetRedisVersion":"7.2"}`)},
		{http.MethodGet, db + "/available-target-versions", nil},
		{http.MethodGet, "/v1/tasks", nil},
		{http.MethodGet, "/v1/tasks/" + id.task, nil},
		{http.MethodGet, "/v1/logs", nil},
		{http.MethodGet, "/v1/acl/redisRules", nil},
		{http.MethodPost, "/v1/acl/redisRules", []byte(`{"name":"r","redisRule":"+@read ~*"}`)},
		{http.MethodPut, "/v1/acl/redisRules/1", []byte(`{"redisRule":"+@read ~k*"}`)},
		{http.MethodDelete, "/v1/acl/redisRules/1", nil},
		{http.MethodGet, "/v1/acl/roles", nil},
		{http.MethodPost, "/v1/acl/roles", fmt.Appendf(nil, `{"name":"r","redisRules":[{"ruleName":"Read-Only","databases":[{"subscriptionId":%d,"databaseId":%d}]}]}`, id.sub, id.db)},
		{http.MethodPut, "/v1/acl/roles/1", []byte(`{"name":"renamed"}`)},
		{http.MethodDelete, "/v1/acl/roles/1", nil},
		{http.MethodGet, "/v1/acl/users", nil},
		{http.MethodGet, "/v1/acl/users/1", nil},
		{http.MethodPost, "/v1/acl/users", []byte(`{"name":"u","role":"r","password":"Auth.pa55word"}`)},
		{http.MethodPut, "/v1/acl/users/1", []byte(`{"password":"Auth.n3w-word"}`)},
		{http.MethodDelete, "/v1/acl/users/1", nil},
	}
}

// Missing, unknown or wrong credentials get 401 with a JSON error on every endpoint; an
// unknown key and a wrong secret get the very same body, so a caller cannot probe for
// keys; and nothing is enqueued. (The failed-login throttle is off: this test fails on
// purpose far more often than it allows.)
func TestAuthenticationFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *cloudapi.Server) { s.LoginFailures = -1 })
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
		case r.path == fmt.Sprintf("/v1/subscriptions/%d/cidr", subID):
			// The allow list is read through a task, as the real API does.
			require.Equal(t, http.StatusAccepted, res.status, "%s: %s", r, res.body)
			statusTasks++
		case r.path == "/v1/acl/users/1":
			require.Equal(t, http.StatusNotFound, res.status, "%s: %s", r, res.body)
		default:
			require.Equal(t, http.StatusOK, res.status, "%s: %s", r, res.body)
		}
	}
	require.Equal(t, 3, statusTasks)
	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+statusTasks, after.tasks)
	after.tasks = before.tasks
	require.Equal(t, before, after)
}

// An unknown key costs what a wrong secret does: both compare the secret's digest once,
// the unknown key against a dummy digest, and both answer the same 401.
func TestUnknownKeyComparesLikeWrongSecret(t *testing.T) {
	e := newEnv(t, func(s *cloudapi.Server) { s.LoginFailures = -1 })
	var compared []*clouddb.APIKey
	restore := cloudapi.WatchSecretMatches(func(k *clouddb.APIKey) { compared = append(compared, k) })
	defer restore()
	for _, cached := range []string{"first", "cached"} {
		compared = nil
		unknown := e.do(http.MethodGet, "/v1/subscriptions", mainKey+"-unknown", "wrong-secret", nil)
		require.Len(t, compared, 1, "%s: an unknown key compares the secret once", cached)
		require.Empty(t, compared[0].Key, "%s: against the dummy key", cached)
		require.Len(t, compared[0].SecretDigest, 32, "%s: a real digest", cached)
		compared = nil
		wrong := e.do(http.MethodGet, "/v1/subscriptions", mainKey, "wrong-secret", nil)
		require.Len(t, compared, 1, "%s: a wrong secret compares the secret once", cached)
		require.Equal(t, mainKey, compared[0].Key)
		requireError(t, unknown, http.StatusUnauthorized, "UNAUTHORIZED")
		require.Equal(t, unknown.body, wrong.body)
	}
}

// After LoginFailures failed authentications from one address in a minute, every request
// from that address, even with good credentials, gets 429 with Retry-After until the
// minute ends; other addresses are served; the throttle remembers a bounded number of
// addresses.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	var api *cloudapi.Server
	e := newEnv(t, func(s *cloudapi.Server) {
		s.LoginFailures = 3
		s.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
		api = s
	})
	for range 3 {
		requireError(t, e.do(http.MethodGet, "/v1/subscriptions", mainKey, "wrong-secret", nil), http.StatusUnauthorized, "UNAUTHORIZED")
	}
	for _, secret := range []string{"wrong-secret", mainSecret} {
		r := e.do(http.MethodGet, "/v1/subscriptions", mainKey, secret, nil)
		ae := requireError(t, r, http.StatusTooManyRequests, "TOO_MANY_FAILED_AUTHENTICATIONS")
		require.Equal(t, "more than 3 failed authentications from this address in a minute; retry in 60 seconds", ae.Error.Description)
		require.Equal(t, "60", r.header.Get("Retry-After"))
	}

	// Another address (127.0.0.2, also loopback) is not held back.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	fromOther := func(secret string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.base+"/subscriptions", nil)
		require.NoError(t, err)
		req.Header.Set("x-api-key", mainKey)
		req.Header.Set("x-api-secret-key", secret)
		resp, err := other.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, fromOther(mainSecret))

	now.Add(int64(61 * time.Second))
	require.Equal(t, http.StatusOK, e.do(http.MethodGet, "/v1/subscriptions", mainKey, mainSecret, nil).status, "the next minute opens again")

	// Two addresses held back at once; one's ended window starting over leaves the other
	// held back, and the first is held back again at the limit of its new window.
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, fromOther("wrong-secret"))
	}
	require.Equal(t, http.StatusTooManyRequests, fromOther(mainSecret))
	requireError(t, e.do(http.MethodGet, "/v1/subscriptions", mainKey, "wrong-secret", nil), http.StatusUnauthorized, "UNAUTHORIZED")
	require.Equal(t, http.StatusTooManyRequests, fromOther(mainSecret), "still held back")
	for range 2 {
		requireError(t, e.do(http.MethodGet, "/v1/subscriptions", mainKey, "wrong-secret", nil), http.StatusUnauthorized, "UNAUTHORIZED")
	}
	requireError(t, e.do(http.MethodGet, "/v1/subscriptions", mainKey, mainSecret, nil), http.StatusTooManyRequests, "TOO_MANY_FAILED_AUTHENTICATIONS")
	now.Add(int64(61 * time.Second))
	require.Equal(t, http.StatusOK, fromOther(mainSecret))
	require.Equal(t, http.StatusOK, e.do(http.MethodGet, "/v1/subscriptions", mainKey, mainSecret, nil).status)

	cloudapi.FailLogins(api, 3*cloudapi.MaxLoginAddresses)
	require.LessOrEqual(t, cloudapi.LoginAddresses(api), cloudapi.MaxLoginAddresses)
}

// A viewer key may HEAD wherever it may GET: HEAD is a read.
func TestViewerHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID, dbID := e.activeSubscription("head")
	for _, path := range []string{"/v1/subscriptions", fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID), "/v1/tasks"} {
		r := e.do(http.MethodHead, path, viewerKey, viewerSecret, nil)
		require.Equal(t, http.StatusOK, r.status, path)
		require.Empty(t, r.body, "%s: a HEAD answer has no body", path)
	}
	requireError(t, e.do(http.MethodDelete, fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID), viewerKey, viewerSecret, nil),
		http.StatusForbidden, "FORBIDDEN")
}
