package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"clouddb/cloudapi/client"
)

func TestRedisCLI(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		endpoint, pass  string
		tls, clientAuth bool
		want            string
	}{
		{"127.0.0.1:12000", "s3cret", false, false, "redis-cli -h 127.0.0.1 -p 12000 --user default --pass 's3cret'"},
		{"db.example:6380", `it's"$x`, false, false, `redis-cli -h db.example -p 6380 --user default --pass 'it'\''s"$x'`},
		{"[::1]:12000", "p", true, false, "redis-cli -h ::1 -p 12000 --user default --pass 'p' --tls --cacert redis_ca.pem"},
		{"127.0.0.1:12000", "p", true, true, "redis-cli -h 127.0.0.1 -p 12000 --user default --pass 'p' --tls --cacert redis_ca.pem --cert client.crt --key client.key"},
		{"127.0.0.1:12000", "", false, false, "redis-cli -h 127.0.0.1 -p 12000 --user default"},
		{"", "p", false, false, ""},
		{"no-port", "p", false, false, ""},
	} {
		require.Equal(t, c.want, redisCLI(c.endpoint, c.pass, c.tls, c.clientAuth), "%+v", c)
	}
	require.Equal(t, "'a b'", shellWord("a b"))
	require.Equal(t, "'$(x)'", shellWord("$(x)"))
}

// activeSubscription creates a subscription of the owner through the console and makes
// it active; it returns its id.
func (e *env) activeSubscription(b *browser, name string) int {
	e.t.Helper()
	id := taskID(e.t, b.post("/console/subscriptions", url.Values{"name": {name}, "dbName": {name + "-db"}, "dbMemory": {"0.5"}}))
	tk, err := e.owner.GetTask(testCtx(e.t), id)
	require.NoError(e.t, err)
	e.activate(tk.ResourceID())
	return tk.ResourceID()
}

func TestCreateAndDeleteDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	b.signIn(ownerKey, ownerSecret)
	ctx := testCtx(t)
	subID := e.activeSubscription(b, "main")
	sub := "/console/subscriptions/" + strconv.Itoa(subID)

	p := b.getOK(sub)
	require.Equal(t, sub+"/databases/new", attr(one(t, p.doc, "new-database"), "href"))
	rows := all(p.doc, "database-row")
	require.Len(t, rows, 1, "the creation plan's database")
	require.Equal(t, "main-db", text(one(t, rows[0], "database-open")))
	require.True(t, refreshes(p), "its database is pending")

	p = b.getOK(sub + "/databases/new")
	form := one(t, p.doc, "new-database-form")
	require.Equal(t, sub+"/databases", attr(form, "action"))

	// Refusals, from the request and from the task's processing, next to the form.
	res := b.post(sub+"/databases", url.Values{"name": {"cache"}, "memoryLimitInGb": {"lots"}, "password": {""}})
	require.Equal(t, http.StatusBadRequest, res.status, res.raw)
	require.Equal(t, "INVALID_FIELD: field memoryLimitInGb: expected a number, got string", text(one(t, res.doc, "form-error")))
	require.Contains(t, res.raw, `value="cache"`)
	res = b.post(sub+"/databases", url.Values{"name": {"cache"}, "memoryLimitInGb": {"0.1"}, "password": {"has space"}})
	require.Equal(t, http.StatusBadRequest, res.status, res.raw)
	require.Contains(t, text(one(t, res.doc, "form-error")), "password may only contain printable characters without spaces")
	require.NotContains(t, res.raw, "has space", "the password is not sent back")
	res = b.post(sub+"/databases", url.Values{"name": {"main-db"}, "memoryLimitInGb": {"0.1"}, "password": {""}})
	require.Equal(t, http.StatusConflict, res.status, res.raw)
	require.Contains(t, text(one(t, res.doc, "form-error")), `name "main-db" is already used`)

	// No password: a generated one (the API requires one). The task page follows the
	// task, then the database it made.
	id := taskID(t, b.post(sub+"/databases", url.Values{"name": {"cache"}, "memoryLimitInGb": {"0.1"}, "password": {""}}))
	tk, err := e.owner.GetTask(ctx, id)
	require.NoError(t, err)
	require.Equal(t, client.TaskCompleted, tk.Status)
	dbID := tk.ResourceID()
	db, err := e.owner.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Len(t, db.Security.Password, 26, "rand.Text")
	href := fmt.Sprintf("%s/databases/%d", sub, dbID)

	p = b.getOK("/console/tasks/" + id)
	require.Equal(t, "databaseCreateRequest", text(one(t, p.doc, "task-command")))
	require.Equal(t, "processing-completed", text(one(t, p.doc, "task-status")))
	require.Equal(t, "3", attr(one(t, p.doc, "task-progress"), "value"))
	require.Equal(t, href, attr(one(t, p.doc, "task-database-open"), "href"))
	require.Equal(t, "pending", text(one(t, p.doc, "task-database-status")))
	require.True(t, refreshes(p), "the database is pending")

	// The database page: the endpoint and the redis-cli line, with the API's password.
	p = b.getOK(href)
	requireSecurityHeaders(t, p.header)
	require.Equal(t, db.PublicEndpoint, text(one(t, p.doc, "database-endpoint")))
	cli := one(t, p.doc, "redis-cli")
	require.Equal(t, "cli", attr(cli, "class"))
	host, port, ok := strings.Cut(db.PublicEndpoint, ":")
	require.True(t, ok)
	require.Equal(t, fmt.Sprintf("redis-cli -h %s -p %s --user default --pass '%s'", host, port, db.Security.Password), text(cli))
	require.Equal(t, href+"/delete", attr(one(t, p.doc, "delete-database"), "href"))
	require.Empty(t, all(p.doc, "ca-download"), "no TLS")

	// The list shows it too.
	p = b.getOK(sub)
	row := rowOf(t, p, "database-row", dbID)
	require.Equal(t, db.PublicEndpoint, text(one(t, row, "database-endpoint")))
	require.Equal(t, text(cli), text(one(t, row, "redis-cli")))

	// TLS: the line says how to trust the server, and the page serves the CA.
	id = taskID(t, b.post(sub+"/databases", url.Values{"name": {"secure"}, "memoryLimitInGb": {"0.1"}, "password": {"Secure-pass1"}, "enableTls": {"true"}}))
	tk, err = e.owner.GetTask(ctx, id)
	require.NoError(t, err)
	tlsHref := fmt.Sprintf("%s/databases/%d", sub, tk.ResourceID())
	p = b.getOK(tlsHref)
	require.True(t, strings.HasSuffix(text(one(t, p.doc, "redis-cli")), "--pass 'Secure-pass1' --tls --cacert redis_ca.pem"), text(one(t, p.doc, "redis-cli")))
	require.Equal(t, tlsHref+"/ca.pem", attr(one(t, p.doc, "ca-download"), "href"))
	res = b.get(tlsHref + "/ca.pem")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, `attachment; filename="redis_ca.pem"`, res.header.Get("Content-Disposition"))
	require.True(t, strings.HasPrefix(res.raw, "-----BEGIN CERTIFICATE-----"), res.raw)

	// Delete: a confirmation, then the task, then it is gone.
	p = b.getOK(href + "/delete")
	confirm := one(t, p.doc, "delete-database-form")
	require.Equal(t, "post", attr(confirm, "method"))
	require.Equal(t, href+"/delete", attr(confirm, "action"))
	id = taskID(t, b.post(href+"/delete", url.Values{}))
	tk, err = e.owner.GetTask(ctx, id)
	require.NoError(t, err)
	require.Equal(t, client.TaskCompleted, tk.Status)
	p = b.getOK("/console/tasks/" + id)
	require.Equal(t, "databaseDeleteRequest", text(one(t, p.doc, "task-command")))
	_, err = e.owner.GetDatabase(ctx, subID, dbID)
	if client.IsNotFound(err) {
		one(t, p.doc, "task-resource-gone")
		require.Equal(t, sub, attr(one(t, p.doc, "task-subscription-open"), "href"))
		require.False(t, refreshes(p))
	} else {
		require.NoError(t, err)
		require.True(t, refreshes(p), "the database is being deleted")
	}
	// Deleting it again: the API's answer on the confirmation page, or a 404 page.
	res = b.post(href+"/delete", url.Values{})
	require.GreaterOrEqual(t, res.status, 400, res.raw)
	require.Less(t, res.status, 500, res.raw)
	one(t, res.doc, "form-error")

	e.requireNoSecret(ownerSecret)
}

// A viewer key sees, and is refused changes with the API's message.
func TestViewerIsReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.browser()
	owner.signIn(ownerKey, ownerSecret)
	subID := e.activeSubscription(owner, "shared")
	dbs, err := e.owner.AllDatabases(testCtx(t), subID)
	require.NoError(t, err)
	require.Len(t, dbs, 1)
	sub := "/console/subscriptions/" + strconv.Itoa(subID)
	href := fmt.Sprintf("%s/databases/%d", sub, dbs[0].ID)

	b := e.browser()
	b.signIn(viewerKey, viewerSecret)
	require.Len(t, all(b.getOK(sub).doc, "database-row"), 1)
	b.getOK(href)
	res := b.post(sub+"/databases", url.Values{"name": {"nope"}, "memoryLimitInGb": {"0.1"}})
	require.Equal(t, http.StatusForbidden, res.status)
	require.Equal(t, "FORBIDDEN: this API key is read-only", text(one(t, res.doc, "form-error")))
	one(t, res.doc, "new-database-form")
	res = b.post(href+"/delete", url.Values{})
	require.Equal(t, http.StatusForbidden, res.status)
	require.Equal(t, "FORBIDDEN: this API key is read-only", text(one(t, res.doc, "form-error")))
	one(t, res.doc, "delete-database-form")
	_, err = e.owner.GetDatabase(testCtx(t), subID, dbs[0].ID)
	require.NoError(t, err, "still there")
	e.requireNoSecret(ownerSecret, viewerSecret)
}

// rowOf is the row of the table element with data-testid id and data-id want.
func rowOf(t *testing.T, p page, id string, want int) *html.Node {
	t.Helper()
	for _, n := range all(p.doc, id) {
		if attr(n, "data-id") == strconv.Itoa(want) {
			return n
		}
	}
	t.Fatalf("no %s with data-id %d", id, want)
	return nil
}
