package cloudapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// Routes answer without the /v1 prefix (the official client's own tests use a bare base
// URL) and with a doubled slash (a base URL with a trailing slash).
func TestRoutePrefixAndSlashes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	bare := client.New(e.srv.URL, mainKey, mainSecret, client.WithPollInterval(10*time.Millisecond))
	slash := client.New(e.base+"/", mainKey, mainSecret, client.WithPollInterval(10*time.Millisecond))
	for name, c := range map[string]*client.Client{"bare": bare, "trailing slash": slash} {
		acc, err := c.GetAccount(ctx)
		require.NoError(t, err, name)
		require.Equal(t, e.mainAccount, acc.ID, name)
		pms, err := c.ListPaymentMethods(ctx)
		require.NoError(t, err, name)
		require.Len(t, pms, 1, name)
		tk, err := c.Wait(ctx)(c.CreateCloudAccount(ctx, cloudAccountBody(name)))
		require.NoError(t, err, name)
		ca, err := c.GetCloudAccount(ctx, tk.ResourceID())
		require.NoError(t, err, name)
		require.Equal(t, name, ca.Name)
	}
	for _, p := range []string{"/subscriptions", "//v1//subscriptions", "/v1/subscriptions/", "/v1//subscriptions//"} {
		res := e.do(http.MethodGet, p, mainKey, mainSecret, nil)
		require.Equal(t, http.StatusOK, res.status, "%s: %s", p, res.body)
		require.JSONEq(t, fmt.Sprintf(`{"accountId":%d,"subscriptions":[],"links":[]}`, e.mainAccount), string(res.body), p)
	}
}

// redis-versions answers the same to the official client's percent-encoded query in the
// path and to a real query string.
func TestRedisVersionsQuirk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID := e.createSubscription(e.main, e.mainPM, "versions")
	var bodies []string
	for _, p := range []string{
		fmt.Sprintf("/v1/subscriptions/redis-versions%%3FsubscriptionId=%d", subID),
		fmt.Sprintf("/v1/subscriptions/redis-versions?subscriptionId=%d", subID),
		"/v1/subscriptions/redis-versions",
	} {
		res := e.do(http.MethodGet, p, mainKey, mainSecret, nil)
		require.Equal(t, http.StatusOK, res.status, "%s: %s", p, res.body)
		var out struct {
			RedisVersions []client.RedisVersion `json:"redisVersions"`
		}
		require.NoError(t, json.Unmarshal(res.body, &out))
		require.NotEmpty(t, out.RedisVersions, p)
		require.NotEmpty(t, out.RedisVersions[0].Version)
		bodies = append(bodies, string(res.body))
	}
	require.Equal(t, bodies[0], bodies[1])
	res := e.do(http.MethodGet, "/v1/subscriptions/redis-versions%3FsubscriptionId=999", mainKey, mainSecret, nil)
	requireError(t, res, http.StatusNotFound, "SUBSCRIPTION_NOT_FOUND")

	versions, err := e.main.RedisVersions(testCtx(t), subID)
	require.NoError(t, err)
	require.True(t, versions[0].IsDefault)
}

// Every 2xx carries a JSON body (the official client fails on an empty one), with a JSON
// content type.
func TestEverySuccessHasAJSONBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID, dbID := e.activeSubscription("bodies")
	caID := e.createCloudAccount(e.main, "bodies")
	tasks, err := e.main.ListTasks(testCtx(t))
	require.NoError(t, err)
	ok := 0
	for _, r := range routes(ids{subID, dbID, caID, tasks[0].ID}) {
		switch {
		case r.method == http.MethodPost && r.path == "/v1/subscriptions":
			b, _ := json.Marshal(e.subscriptionBody("another", e.mainPM, 1, 1))
			r.body = b
		case r.method == http.MethodPost && strings.HasSuffix(r.path, "/databases"):
			r.body = []byte(`{"name":"another","memoryLimitInGb":0.1,"password":"pw"}`)
		case r.method == http.MethodPost && r.path == "/v1/cloud-accounts":
			b, _ := json.Marshal(cloudAccountBody("another"))
			r.body = b
		}
		if r.method == http.MethodGet && r.path == "/v1/acl/users/1" {
			continue // no user exists here (its 200 is in acl_test.go)
		}
		res := e.do(r.method, r.path, mainKey, mainSecret, r.body)
		require.True(t, res.status >= 200 && res.status < 300, "%s: %d %s", r, res.status, res.body)
		require.Equal(t, "application/json", res.header.Get("Content-Type"), r.String())
		require.True(t, json.Valid(res.body) && len(bytes.TrimSpace(res.body)) > 0, "%s: %q", r, res.body)
		ok++
	}
	require.Greater(t, ok, 20)
}

// The status codes of asynchronous calls follow the OpenAPI: 202 for creates and the
// cloud-account update, 200 for the other updates and deletes.
func TestAsyncStatusCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID, dbID := e.activeSubscription("codes")
	caID := e.createCloudAccount(e.main, "codes")
	sub := fmt.Sprintf("/v1/subscriptions/%d", subID)
	subBody, _ := json.Marshal(e.subscriptionBody("more", e.mainPM, 1, 1))
	caBody, _ := json.Marshal(cloudAccountBody("more"))
	for _, c := range []struct {
		r    route
		want int
	}{
		{route{http.MethodPost, "/v1/subscriptions", subBody}, http.StatusAccepted},
		{route{http.MethodPost, sub + "/databases", []byte(`{"name":"x","memoryLimitInGb":0.1,"password":"p"}`)}, http.StatusAccepted},
		{route{http.MethodPost, "/v1/cloud-accounts", caBody}, http.StatusAccepted},
		{route{http.MethodPut, fmt.Sprintf("/v1/cloud-accounts/%d", caID), []byte(`{"name":"renamed"}`)}, http.StatusAccepted},
		{route{http.MethodPut, sub, []byte(`{"name":"renamed"}`)}, http.StatusOK},
		{route{http.MethodPut, fmt.Sprintf("%s/databases/%d", sub, dbID), []byte(`{"name":"renamed","replicaOf":null}`)}, http.StatusOK},
		{route{http.MethodDelete, fmt.Sprintf("%s/databases/%d", sub, dbID), nil}, http.StatusOK},
		{route{http.MethodDelete, fmt.Sprintf("/v1/cloud-accounts/%d", caID), nil}, http.StatusOK},
	} {
		res := e.do(c.r.method, c.r.path, mainKey, mainSecret, c.r.body)
		require.Equal(t, c.want, res.status, "%s: %s", c.r, res.body)
		require.Equal(t, "received", rawTask(t, res.body)["status"])
	}
}

// replicaOf: null, which the official client always sends, means "no change"; [] clears;
// a list of sources (full URIs, or host:port for a database of the account) reads back
// as given, and a bad source fails the task and changes nothing.
func TestReplicaOf(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("replicas")
	before, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Nil(t, before.ReplicaOf)

	tk, err := e.main.Wait(ctx)(e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{Name: client.Ptr("renamed")}))
	require.NoError(t, err)
	require.Equal(t, dbID, tk.ResourceID())
	after, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, "renamed", after.Name)
	require.Nil(t, after.ReplicaOf)
	require.Equal(t, before.Security.Password, after.Security.Password)
	require.Equal(t, before.MemoryLimitInGB, after.MemoryLimitInGB)

	_, err = e.main.Wait(ctx)(e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{ReplicaOf: []string{}}))
	require.NoError(t, err)

	// Sources are accepted: a full URI, or host:port for a database of the account.
	tk, err = e.main.Wait(ctx)(e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("source"),
		MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-source")}))
	require.NoError(t, err)
	e.activate(subID) // the create resized it; no reconciler runs here
	src, err := e.main.GetDatabase(ctx, subID, tk.ResourceID())
	require.NoError(t, err)
	_, err = e.main.Wait(ctx)(e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{ReplicaOf: []string{"redis://:pw@10.0.0.9:6379", src.PublicEndpoint}}))
	require.NoError(t, err)
	got, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, &client.ReplicaOf{Endpoints: []string{"redis://:pw@10.0.0.9:6379", src.PublicEndpoint}}, got.ReplicaOf)

	// A same-account source that names no database, and a source that is the database
	// itself, fail the task; nothing changes.
	before, err = e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	for _, bad := range []string{"127.0.0.1:1", got.PublicEndpoint, "http://h:1", "redis://h"} {
		_, err = e.main.Wait(ctx)(e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{ReplicaOf: []string{bad}}))
		require.Error(t, err, bad)
	}
	after, err = e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, before.ReplicaOf, after.ReplicaOf)
}

// POST …/backup takes no body (with Content-Type: application/json, as the real client
// sends) or an optional one; POST …/import needs its body; both answer 200 with a task.
// Here no database is active (no reconciler runs), so the tasks fail with
// DATABASE_NOT_ACTIVE: the point is the shape of the answers.
func TestBackupImportRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("later")
	db := fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID)
	for _, body := range [][]byte{nil, []byte(`{}`), []byte(`{"adhocBackupPath":"/tmp/x"}`)} {
		res := e.do(http.MethodPost, db+"/backup", mainKey, mainSecret, body)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Contains(t, string(res.body), `"commandType":"databaseBackupRequest"`)
	}
	res := e.do(http.MethodPost, db+"/import", mainKey, mainSecret, []byte(`{"sourceType":"http","importFromUri":["http://127.0.0.1:1/a.rdb"]}`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Contains(t, string(res.body), `"commandType":"databaseImportRequest"`)
	count := e.counts(e.mainAccount)
	for _, body := range [][]byte{nil, []byte(`[]`), []byte(`{"importFromUri":"x"}`), []byte(`{"sourceType":5}`)} {
		requireError(t, e.do(http.MethodPost, db+"/import", mainKey, mainSecret, body), http.StatusBadRequest, "")
	}
	requireError(t, e.do(http.MethodPost, db+"/backup", mainKey, mainSecret, []byte(`{"adhocBackupPath":7}`)), http.StatusBadRequest, "")
	require.Equal(t, count, e.counts(e.mainAccount), "refused requests make no task")

	tk, err := e.main.BackupDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	_, err = e.main.WaitForTask(ctx, tk.ID)
	requireClientError(t, err, http.StatusConflict, "DATABASE_NOT_ACTIVE")
}

// An unknown path is a JSON 404 and a known path with the wrong method a JSON 405 with
// an Allow header, even without credentials.
func TestUnroutedRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, p := range []string{"/v1/no-such-thing", "/v1/subscriptions/1/databases/2/nothing", "/v2/subscriptions"} {
		for _, k := range [][2]string{{mainKey, mainSecret}, {"", ""}} {
			requireError(t, e.do(http.MethodGet, p, k[0], k[1], nil), http.StatusNotFound, "NOT_FOUND")
		}
	}
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPatch, "/v1/subscriptions/1", "DELETE, GET, HEAD, PUT"},
		{http.MethodDelete, "/v1/subscriptions", "GET, HEAD, POST"},
		{http.MethodPost, "/v1/tasks", "GET, HEAD"},
		{http.MethodPut, "/v1/payment-methods", "GET, HEAD"},
	} {
		res := e.do(c.method, c.path, mainKey, mainSecret, []byte(`{}`))
		requireError(t, res, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		require.Equal(t, c.allow, res.header.Get("Allow"), "%s %s", c.method, c.path)
	}
	// "GET *" names no resource: a JSON 404 too, not ServeMux's empty 400 ("OPTIONS *"
	// net/http answers itself).
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET * HTTP/1.1\r\nHost: "+e.srv.Listener.Addr().String()+"\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "%s", body)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	require.Contains(t, string(body), `"type":"NOT_FOUND"`)
}

// The database list pages with limit and offset; a page past the end is empty but still
// holds exactly one subscription entry for the subscription asked for, which ends the
// official client's paging.
func TestDatabasePaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID := e.createSubscription(e.main, e.mainPM, "paged", 5)
	var seen []int
	for offset := 0; offset <= 6; offset += 2 {
		page, err := e.main.ListDatabases(ctx, subID, 2, offset)
		require.NoError(t, err)
		require.Equal(t, e.mainAccount, page.AccountID)
		require.Len(t, page.Subscription, 1)
		entry := page.Subscription[0]
		require.Equal(t, subID, entry.SubscriptionID)
		require.Equal(t, 5, entry.NumberOfDatabases)
		require.Len(t, entry.Databases, min(2, max(0, 5-offset)), "offset %d", offset)
		for _, d := range entry.Databases {
			seen = append(seen, d.ID)
		}
	}
	require.Len(t, seen, 5)
	for i := 1; i < len(seen); i++ {
		require.Greater(t, seen[i], seen[i-1])
	}

	// The raw empty page, as the official client reads it.
	res := e.do(http.MethodGet, fmt.Sprintf("/v1/subscriptions/%d/databases?limit=100&offset=100", subID), mainKey, mainSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	var raw struct {
		Subscription []map[string]json.RawMessage `json:"subscription"`
	}
	require.NoError(t, json.Unmarshal(res.body, &raw))
	require.Len(t, raw.Subscription, 1)
	require.JSONEq(t, fmt.Sprint(subID), string(raw.Subscription[0]["subscriptionId"]))
	require.JSONEq(t, `[]`, string(raw.Subscription[0]["databases"]))

	all, err := e.main.AllDatabases(ctx, subID)
	require.NoError(t, err)
	require.Len(t, all, 5)
	names := []string{}
	for _, d := range all {
		names = append(names, d.Name)
	}
	require.Equal(t, []string{"db", "db-2", "db-3", "db-4", "db-5"}, names)

	for _, q := range []string{"limit=0", "limit=101", "offset=-1", "limit=x"} {
		res := e.do(http.MethodGet, fmt.Sprintf("/v1/subscriptions/%d/databases?%s", subID, q), mainKey, mainSecret, nil)
		requireError(t, res, http.StatusBadRequest, "INVALID_FIELD")
	}
}

// A database reads back in the shape Terraform dereferences: throughputMeasurement,
// clustering and security with its three booleans always present, timestamps RFC 3339.
func TestDatabaseShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("shape")
	d, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, dbID, d.ID)
	require.Equal(t, "db", d.Name)
	require.Equal(t, "redis", d.Protocol)
	require.Equal(t, "pending", d.Status)
	require.Equal(t, 1.5, d.DatasetSizeInGB)
	require.NotNil(t, d.ThroughputMeasurement)
	require.NotNil(t, d.Clustering)
	require.NotNil(t, d.Security)
	require.NotNil(t, d.Security.EnableTLS)
	require.NotNil(t, d.Security.EnableDefaultUser)
	require.NotNil(t, d.Security.TLSClientAuthentication)
	require.NotEmpty(t, d.Security.Password, "a creation-plan database gets a generated password")
	require.NotNil(t, d.LastModified)
	require.Nil(t, d.ActivatedOn, "not active yet")
	require.Nil(t, d.ActiveActiveRedis)
	require.Regexp(t, `^127\.0\.0\.1:\d+$`, d.PublicEndpoint)
	for i, r := range d.Clustering.RegexRules {
		require.Equal(t, i, r.Ordinal)
	}

	sub, err := e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, "active", sub.Status)
	require.Equal(t, 1, sub.NumberOfDatabases)
	require.Equal(t, "credit-card", sub.PaymentMethodType)
	require.Equal(t, e.mainPM, sub.PaymentMethodID)
	require.Len(t, sub.CloudDetails, 1)
	require.Equal(t, 1, sub.CloudDetails[0].CloudAccountID)
	require.Equal(t, "10.0.0.0/24", sub.CloudDetails[0].Regions[0].Networking[0].DeploymentCIDR)
}

// GET /payment-methods: creditCardEndsWith is a number and the card has not expired
// (Terraform's data source drops expired cards).
func TestPaymentMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.do(http.MethodGet, "/v1/payment-methods", mainKey, mainSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	m := rawTask(t, res.body)
	require.Equal(t, json.Number(fmt.Sprint(e.mainAccount)), m["accountId"])
	pms := m["paymentMethods"].([]any)
	require.Len(t, pms, 1)
	pm := pms[0].(map[string]any)
	require.Equal(t, json.Number("4242"), pm["creditCardEndsWith"])
	require.Equal(t, json.Number(fmt.Sprint(e.mainPM)), pm["id"])

	list, err := e.main.ListPaymentMethods(testCtx(t))
	require.NoError(t, err)
	now := time.Now()
	p := list[0]
	require.True(t, p.ExpirationYear > now.Year() || (p.ExpirationYear == now.Year() && p.ExpirationMonth >= int(now.Month())))
	require.Equal(t, "Visa", p.Type)
}

// GET /logs lists the account's changes newest first, pages with offset and limit, and
// shows only the caller's account.
func TestLogs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	for i := range 3 {
		e.createCloudAccount(e.main, fmt.Sprintf("logged-%d", i))
	}
	subID := e.createSubscription(e.main, e.mainPM, "logged")
	e.createCloudAccount(e.other, "theirs")

	all, err := e.main.Logs(ctx, client.LogQuery{})
	require.NoError(t, err)
	require.Len(t, all, 5) // three cloud accounts, a subscription and its database
	for i := 1; i < len(all); i++ {
		require.Less(t, all[i].ID, all[i-1].ID, "entries are not newest first")
		require.False(t, all[i].Time.After(all[i-1].Time))
	}
	require.Equal(t, "Subscription", all[0].Type)
	require.Equal(t, subID, all[0].ResourceID)
	require.Equal(t, "API", all[0].Originator)
	require.Equal(t, mainKey+"-name", all[0].APIKeyName)
	require.Equal(t, "Database", all[1].Type)
	require.Contains(t, all[4].Description, "logged-0")

	page, err := e.main.Logs(ctx, client.LogQuery{Offset: 1, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, all[1:3], page)
	page, err = e.main.Logs(ctx, client.LogQuery{Offset: 5})
	require.NoError(t, err)
	require.Empty(t, page)
	page, err = e.main.Logs(ctx, client.LogQuery{ResourceID: subID})
	require.NoError(t, err)
	require.NotEmpty(t, page)
	for _, en := range page {
		require.Equal(t, subID, en.ResourceID)
	}

	res := e.do(http.MethodGet, "/v1/logs?limit=1", mainKey, mainSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	m := rawTask(t, res.body)
	entry := m["entries"].([]any)[0].(map[string]any)
	requireTimestamp(t, entry["time"])
	require.IsType(t, json.Number(""), entry["id"])

	for _, q := range []string{"limit=0", "limit=1001", "offset=-1"} {
		requireError(t, e.do(http.MethodGet, "/v1/logs?"+q, mainKey, mainSecret, nil), http.StatusBadRequest, "INVALID_FIELD")
	}
}

// The account-level lists decode into the client's types.
func TestAccountLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	acc, err := e.main.GetAccount(ctx)
	require.NoError(t, err)
	require.Equal(t, "main", acc.Name)
	require.Equal(t, mainKey+"-name", acc.Key.Name)
	regions, err := e.main.ListRegions(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, regions)
	dp, err := e.main.ListDataPersistence(ctx)
	require.NoError(t, err)
	require.Len(t, dp, 6)
	mods, err := e.main.ListModules(ctx)
	require.NoError(t, err)
	require.NotNil(t, mods)
	cas, err := e.main.ListCloudAccounts(ctx)
	require.NoError(t, err)
	require.Equal(t, []client.CloudAccount{{ID: 1, Name: "Redis Internal Resources", Provider: "AWS", Status: "active"}}, cas.CloudAccounts)
	require.NoError(t, e.main.Health(ctx))
}
