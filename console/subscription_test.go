package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
)

func TestSubscriptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	b.signIn(ownerKey, ownerSecret)

	p := b.getOK("/console/subscriptions")
	requireSecurityHeaders(t, p.header)
	require.Empty(t, all(p.doc, "subscription-row"))
	require.False(t, refreshes(p))
	form := one(t, p.doc, "new-subscription-form")
	require.Equal(t, "/console/subscriptions", attr(form, "action"))

	// The API's refusals, next to the form, with what was typed.
	res := b.post("/console/subscriptions", url.Values{"name": {"shop"}, "dbName": {"cache"}, "dbMemory": {"lots"}})
	require.Equal(t, http.StatusBadRequest, res.status, res.raw)
	require.Equal(t, "INVALID_FIELD: field databases[0].memoryLimitInGb: expected a number, got string", text(one(t, res.doc, "form-error")))
	require.Contains(t, res.raw, `value="shop"`)
	require.Contains(t, res.raw, `value="lots"`)
	res = b.post("/console/subscriptions", url.Values{"name": {""}, "dbName": {"cache"}, "dbMemory": {"1"}})
	require.Equal(t, http.StatusBadRequest, res.status, res.raw)
	require.Contains(t, text(one(t, res.doc, "form-error")), "subscription: name is required")

	// A valid form: the task page, which follows the subscription while it is pending
	// (there is no reconciler here to make it active).
	id := taskID(t, b.post("/console/subscriptions", url.Values{"name": {"shop <1>"}, "dbName": {"cache"}, "dbMemory": {"1"}}))
	tk, err := e.owner.GetTask(testCtx(t), id)
	require.NoError(t, err)
	subID := tk.ResourceID()
	require.NotZero(t, subID)
	p = b.getOK("/console/tasks/" + id)
	require.Equal(t, "processing-completed", text(one(t, p.doc, "task-status")))
	require.Equal(t, "/console/subscriptions/"+strconv.Itoa(subID), attr(one(t, p.doc, "task-subscription-open"), "href"))
	require.Equal(t, "pending", text(one(t, p.doc, "task-subscription-status")))
	require.True(t, refreshes(p), "the subscription is pending")

	p = b.getOK("/console/subscriptions")
	rows := all(p.doc, "subscription-row")
	require.Len(t, rows, 1)
	require.Equal(t, strconv.Itoa(subID), attr(rows[0], "data-id"))
	require.Equal(t, "shop <1>", text(one(t, rows[0], "subscription-open")))
	require.Contains(t, p.raw, "shop &lt;1&gt;", "escaped")
	require.Equal(t, "pending", text(one(t, rows[0], "status")))
	require.Equal(t, "1", text(one(t, rows[0], "subscription-databases")))
	require.True(t, refreshes(p))

	e.activate(subID)
	p = b.getOK("/console/tasks/" + id)
	require.Equal(t, "active", text(one(t, p.doc, "task-subscription-status")))
	require.False(t, refreshes(p), "settled")

	// Another account's subscription does not exist for this key: the API's 404.
	other := e.browser()
	other.signIn(otherKey, otherSecret)
	res = other.get("/console/subscriptions/" + strconv.Itoa(subID))
	require.Equal(t, http.StatusNotFound, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "SUBSCRIPTION_NOT_FOUND")
	require.Empty(t, all(other.getOK("/console/subscriptions").doc, "subscription-row"))

	// Paths that are no page.
	for _, path := range []string{"/console/subscriptions/abc", "/console/subscriptions/0", "/console/nothing", "/console/subscriptions/1/databases/x"} {
		res = b.get(path)
		require.Equal(t, http.StatusNotFound, res.status, path)
		requireSecurityHeaders(t, res.header)
		one(t, res.doc, "form-error")
	}
	e.requireNoSecret(ownerSecret, otherSecret)
}

// The API's rate limit applies to the console's calls: past it, the page says so.
func TestRateLimited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *cloudapi.Server) { s.RateLimit = 3 })
	b := e.browser()
	b.signIn(ownerKey, ownerSecret) // one call
	b.getOK("/console/subscriptions")
	b.getOK("/console/tasks")
	res := b.get("/console/subscriptions")
	require.Equal(t, http.StatusTooManyRequests, res.status, res.raw)
	require.Contains(t, text(one(t, res.doc, "form-error")), "RATE_LIMIT_EXCEEDED")
}

// A memory size that strconv reads as a number but JSON does not (NaN, Inf, +1, 1., .5)
// is the API's refusal next to the form, not a 500: it goes to the API as the text typed.
func TestMemoryNotAJSONNumber(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	b.signIn(ownerKey, ownerSecret)
	subID := e.activeSubscription(b, "shop")
	for _, m := range []string{"NaN", "Inf", "-Infinity", "+1", "1.", ".5", "0x1p3", "1_0"} {
		res := b.post("/console/subscriptions", url.Values{"name": {"s"}, "dbName": {"d"}, "dbMemory": {m}})
		require.Equal(t, http.StatusBadRequest, res.status, "%s: %s", m, res.raw)
		require.Equal(t, "INVALID_FIELD: field databases[0].memoryLimitInGb: expected a number, got string", text(one(t, res.doc, "form-error")), m)
		require.Equal(t, m, inputValue(t, res.doc, "dbMemory"), "what was typed, shown again")

		res = b.post("/console/subscriptions/"+strconv.Itoa(subID)+"/databases", url.Values{"name": {"d"}, "memoryLimitInGb": {m}})
		require.Equal(t, http.StatusBadRequest, res.status, "%s: %s", m, res.raw)
		require.Equal(t, "INVALID_FIELD: field memoryLimitInGb: expected a number, got string", text(one(t, res.doc, "form-error")), m)
	}
	list, err := e.owner.ListSubscriptions(testCtx(t))
	require.NoError(t, err)
	require.Len(t, list.Subscriptions, 1, "only the one made above")
	dbs, err := e.owner.AllDatabases(testCtx(t), subID)
	require.NoError(t, err)
	require.Len(t, dbs, 1, "only the subscription's first database")
}

func TestFormNumber(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]any{
		"1": json.Number("1"), "0.5": json.Number("0.5"), "-2": json.Number("-2"), "1e3": json.Number("1e3"), "1E-2": json.Number("1E-2"),
		"NaN": "NaN", "Inf": "Inf", "+1": "+1", "1.": "1.", ".5": ".5", "0x10": "0x10", "01": "01", "": "", "1 2": "1 2", "lots": "lots",
	} {
		require.Equal(t, want, formNumber(v), "%q", v)
	}
}

// inputValue is the value of the input whose id is id.
func inputValue(t *testing.T, n *html.Node, id string) string {
	t.Helper()
	var found []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "input" && attr(n, "id") == id {
			found = append(found, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	require.Len(t, found, 1, "inputs with id %q", id)
	return attr(found[0], "value")
}

// A request the API accepted is not shown as refused because following its task failed
// (here the rate limit, spent by the creation itself): the browser goes to the task's
// page, rather than back to the form with an error that invites a second creation.
func TestAcceptedThenRateLimited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *cloudapi.Server) { s.RateLimit = 3 })
	b := e.browser()
	b.signIn(ownerKey, ownerSecret) // one call; the post makes two (payment methods, create)
	res := b.post("/console/subscriptions", url.Values{"name": {"shop"}, "dbName": {"cache"}, "dbMemory": {"1"}})
	id := taskID(t, res)
	require.NotEmpty(t, id)
	list, err := client.New(e.srv.URL+"/v1", viewerKey, viewerSecret).ListSubscriptions(testCtx(t))
	require.NoError(t, err)
	require.Len(t, list.Subscriptions, 1)
}
