package browser_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"clouddb/internal/uitest"
)

// page is a fetched UI page, parsed.
type page struct {
	status   int
	header   http.Header
	raw      string
	doc      *html.Node
	location string
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (b *testBundle) page(t *testing.T, method, path string, form url.Values, header ...string) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.url+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if strings.EqualFold(header[i], "Host") {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	res, err := noRedirect.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	p := page{status: res.StatusCode, header: res.Header, raw: string(raw), location: res.Header.Get("Location")}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		p.doc, err = html.Parse(strings.NewReader(p.raw))
		require.NoError(t, err)
	}
	return p
}

func (b *testBundle) getPage(t *testing.T, path string) page {
	t.Helper()
	p := b.page(t, http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, p.status, "GET %s: %s", path, p.raw)
	require.NotNil(t, p.doc, "GET %s is not HTML", path)
	return p
}

// The pages' readers by data-testid, shared with the other UI's tests.
var (
	attr = uitest.Attr
	all  = uitest.All
	one  = uitest.One
	text = uitest.Text
)

func texts(nodes []*html.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = text(n)
	}
	return out
}

// addForm is the add-database form as a browser posts it.
func addForm(name, host string, port int) url.Values {
	return url.Values{"name": {name}, "connectionType": {"STANDALONE"}, "host": {host}, "port": {strconv.Itoa(port)}, "username": {""}, "password": {""}}
}

// addDB adds a standalone database through the form and returns its id.
func addDB(t *testing.T, b *testBundle, name string, port int) int {
	t.Helper()
	p := b.page(t, http.MethodPost, "/ui/db", addForm(name, "127.0.0.1", port))
	require.Equal(t, http.StatusSeeOther, p.status, p.raw)
	id, ok := strings.CutPrefix(p.location, "/ui/db/")
	require.True(t, ok, "redirect to %q", p.location)
	n, err := strconv.Atoi(id)
	require.NoError(t, err)
	return n
}

func TestUIDatabases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := startRedis(t, freePort(t), "--requirepass", "s3cret")

	p := b.getPage(t, "/")
	require.Empty(t, all(one(t, p.doc, "db-list"), "db-row"))
	require.Equal(t, "/ui/db/new", attr(one(t, p.doc, "add-db"), "href"))
	require.Equal(t, "/ui/certificates", attr(one(t, p.doc, "nav-certificates"), "href"))
	require.Contains(t, p.header.Get("Content-Security-Policy"), "frame-ancestors 'none'")

	form := b.getPage(t, "/ui/db/new")
	f := one(t, form.doc, "add-db-form")
	require.Equal(t, "post", attr(f, "method"))
	require.Equal(t, "/ui/db", attr(f, "action"))
	one(t, f, "add-db-submit")
	var names []string
	var options []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "input" || n.Data == "select") {
			names = append(names, attr(n, "name"))
			if attr(n, "name") == "useTls" {
				require.Equal(t, "checkbox", attr(n, "type"))
			}
		}
		if n.Type == html.ElementNode && n.Data == "option" && n.Parent != nil && attr(n.Parent, "name") == "connectionType" {
			options = append(options, attr(n, "value"))
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(f)
	for _, want := range []string{"name", "connectionType", "host", "port", "username", "password", "useTls"} {
		require.Contains(t, names, want)
	}
	require.Equal(t, []string{"STANDALONE", "CLUSTER", "SENTINEL"}, options)

	// A valid form creates the record (tested first, as the API does) and redirects
	// to its key browser.
	add := addForm("cache <main>", "127.0.0.1", srv.port)
	add.Set("password", "s3cret")
	res := b.page(t, http.MethodPost, "/ui/db", add)
	require.Equal(t, http.StatusSeeOther, res.status, res.raw)
	dbs := b.get(t, "/api/db").body["dbs"].([]any)
	require.Len(t, dbs, 1)
	rec := dbs[0].(map[string]any)
	require.Equal(t, "cache <main>", rec["name"])
	require.Equal(t, "STANDALONE", rec["connectionType"])
	require.Equal(t, float64(srv.port), rec["port"])
	require.Equal(t, true, rec["password"])
	dbID := id(t, rec["id"])
	require.Equal(t, "/ui/db/"+itoa(dbID), res.location)

	p = b.getPage(t, "/")
	rows := all(one(t, p.doc, "db-list"), "db-row")
	require.Len(t, rows, 1)
	open := one(t, rows[0], "db-open")
	require.Equal(t, "cache <main>", text(open))
	require.Equal(t, "/ui/db/"+itoa(dbID), attr(open, "href"))
	require.Contains(t, text(one(t, rows[0], "db-status")), "last connected")
	require.NotContains(t, p.raw, "s3cret")

	// ?test= tests the record now.
	p = b.getPage(t, "/?test="+itoa(dbID))
	require.Contains(t, text(one(t, p.doc, "db-status")), "reachable, Redis ")
	srv.kill()
	p = b.getPage(t, "/?test="+itoa(dbID))
	require.Contains(t, text(one(t, p.doc, "db-status")), "unreachable: ")

	// Delete, through the form.
	res = b.page(t, http.MethodPost, "/ui/db/"+itoa(dbID)+"/delete", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.status, res.raw)
	require.Equal(t, "/", res.location)
	require.Equal(t, 0, b.connectionCount(t))
}

func TestUIAddErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := startRedis(t, freePort(t), "--requirepass", "s3cret")

	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		words  []string
	}{
		{"BadPort", addForm("x", "127.0.0.1", 0), http.StatusBadRequest, []string{"INVALID_FIELD", "port"}},
		{"NoHost", addForm("x", "", srv.port), http.StatusBadRequest, []string{"host"}},
		{"BadType", func() url.Values {
			f := addForm("x", "127.0.0.1", srv.port)
			f.Set("connectionType", "MEMCACHED")
			return f
		}(), http.StatusBadRequest, []string{"connectionType", "STANDALONE, CLUSTER, SENTINEL"}},
		{"WrongPassword", func() url.Values { f := addForm("x", "127.0.0.1", srv.port); f.Set("password", "nope"); return f }(), http.StatusFailedDependency, []string{"CONNECTION_AUTH_FAILED"}},
		{"Unreachable", addForm("x", "127.0.0.1", freePort(t)), http.StatusFailedDependency, []string{"CONNECTION_UNREACHABLE"}},
		{"SentinelWithoutGroup", func() url.Values {
			f := addForm("x", "127.0.0.1", srv.port)
			f.Set("connectionType", "SENTINEL")
			return f
		}(), http.StatusBadRequest, []string{"sentinelMaster.serviceName"}},
		{"ClientCertWithoutTLS", func() url.Values {
			f := addForm("x", "127.0.0.1", srv.port)
			f.Set("clientCert", "1")
			f.Set("useTls", "true")
			return f
		}(), http.StatusBadRequest, []string{"tls.clientCertificateKeyPair.id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.page(t, http.MethodPost, "/ui/db", tc.form)
			require.Equal(t, tc.status, res.status, res.raw)
			require.NotNil(t, res.doc)
			msg := text(one(t, res.doc, "form-error"))
			for _, w := range tc.words {
				require.Contains(t, msg, w)
			}
			// The form again, with what was typed.
			f := one(t, res.doc, "add-db-form")
			one(t, f, "add-db-submit")
			require.Contains(t, res.raw, `value="x"`)
		})
	}
	require.Equal(t, 0, b.connectionCount(t))
}

// fillUI writes one key of each type, and filler keys, into the database.
func fillUI(t *testing.T, rc *redis.Client, fillers int) {
	t.Helper()
	ctx := context.Background()
	pipe := rc.Pipeline()
	pipe.Set(ctx, "greeting", "hello <world> & \"you\"", 0)
	pipe.Set(ctx, "<script>alert(1)</script>", "x", 0)
	pipe.Set(ctx, "bin\xff\x00", "\x00\x01\xfe", 0)
	pipe.Set(ctx, "soon", "v", 0)
	pipe.Expire(ctx, "soon", 5000e9)
	pipe.HSet(ctx, "user:1", "name", "Ada", "lang", "<go>", "id", "1")
	pipe.RPush(ctx, "queue", "a", "b", "c")
	pipe.SAdd(ctx, "tags", "x", "y")
	pipe.ZAdd(ctx, "board", redis.Z{Score: 1.5, Member: "alice"}, redis.Z{Score: 3, Member: "bob"})
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: "events", ID: "1-1", Values: []any{"kind", "login", "who", "ada"}})
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: "events", ID: "2-0", Values: []any{"kind", "logout"}})
	for i := range 300 {
		pipe.HSet(ctx, "bighash", fmt.Sprintf("f%03d", i), i)
	}
	for i := range fillers {
		pipe.Set(ctx, fmt.Sprintf("filler:%04d", i), i, 0)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
}

func TestUIKeyBrowser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := startRedis(t, freePort(t))
	rc := client(t, srv.addr(), "")
	fillUI(t, rc, 400)
	dbID := addDB(t, b, "main", srv.port)
	size, err := rc.DBSize(context.Background()).Result()
	require.NoError(t, err)

	p := b.getPage(t, "/ui/db/"+itoa(dbID))
	filter := one(t, p.doc, "key-filter")
	require.Equal(t, "get", attr(filter, "method"))
	one(t, filter, "key-filter-submit")
	require.Equal(t, strconv.FormatInt(size, 10), text(one(t, p.doc, "key-total")))
	scanned, err := strconv.Atoi(text(one(t, p.doc, "key-scanned")))
	require.NoError(t, err)
	require.Positive(t, scanned)

	// Page through the whole listing with keys-next: every key once.
	seen := map[string]map[string]string{}
	for range 100 {
		for _, row := range all(one(t, p.doc, "key-list"), "key-row") {
			name := text(one(t, row, "key-open"))
			require.NotContains(t, seen, name)
			seen[name] = map[string]string{
				"type": text(one(t, row, "key-type")), "ttl": text(one(t, row, "key-ttl")),
				"size": text(one(t, row, "key-size")), "href": attr(one(t, row, "key-open"), "href"),
			}
		}
		next := all(p.doc, "keys-next")
		if len(next) == 0 {
			break
		}
		require.Len(t, next, 1)
		p = b.getPage(t, attr(next[0], "href"))
		require.Equal(t, strconv.FormatInt(size, 10), text(one(t, p.doc, "key-total")))
		// The scanned count adds up over the pages, and never passes the total.
		more, serr := strconv.Atoi(text(one(t, p.doc, "key-scanned")))
		require.NoError(t, serr)
		require.GreaterOrEqual(t, more, scanned)
		require.LessOrEqual(t, more, int(size))
		scanned = more
	}
	require.Equal(t, int(size), scanned, "a whole listing scanned every key")
	require.Len(t, seen, int(size))
	require.Equal(t, "hash", seen["user:1"]["type"])
	require.Equal(t, "stream", seen["events"]["type"])
	require.Equal(t, "zset", seen["board"]["type"])
	require.Equal(t, "No limit", seen["user:1"]["ttl"])
	ttl, err := strconv.Atoi(strings.TrimSuffix(seen["soon"]["ttl"], " s"))
	require.NoError(t, err)
	require.InDelta(t, 5000, ttl, 10)
	require.Regexp(t, `^[0-9]+ B$`, seen["user:1"]["size"])
	// A binary name shows escaped, and its link carries its bytes.
	require.Contains(t, seen, `bin\xff\x00`)
	u, err := url.Parse(seen[`bin\xff\x00`]["href"])
	require.NoError(t, err)
	require.Equal(t, "bin\xff\x00", u.Query().Get("name"))

	// A key named <script> is text, never markup.
	require.Contains(t, seen, "<script>alert(1)</script>")
	p = b.getPage(t, "/ui/db/"+itoa(dbID)+"?match="+url.QueryEscape("<script>*"))
	require.NotContains(t, p.raw, "<script>")
	require.Contains(t, p.raw, "&lt;script&gt;")
	rows := all(p.doc, "key-row")
	require.Len(t, rows, 1)
	require.Equal(t, "<script>alert(1)</script>", text(one(t, rows[0], "key-open")))

	// Filters: pattern and type; the form shows them again.
	p = b.getPage(t, "/ui/db/"+itoa(dbID)+"?match=user:*&type=")
	require.Equal(t, []string{"user:1"}, texts(all(p.doc, "key-open")))
	p = b.getPage(t, "/ui/db/"+itoa(dbID)+"?type=hash")
	got := texts(all(p.doc, "key-open"))
	slices.Sort(got)
	require.Equal(t, []string{"bighash", "user:1"}, got)
	require.Equal(t, []string{"hash", "hash"}, texts(all(p.doc, "key-type")))
	require.Contains(t, p.raw, `<option value="hash" selected>`)

	// A bad type is the API's 400, in the page.
	res := b.page(t, http.MethodGet, "/ui/db/"+itoa(dbID)+"?type=no%20such", nil)
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "type")
	// An unknown record is a 404 page.
	res = b.page(t, http.MethodGet, "/ui/db/999", nil)
	require.Equal(t, http.StatusNotFound, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "CONNECTION_NOT_FOUND")
}

func TestUIKeyPanel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := startRedis(t, freePort(t))
	rc := client(t, srv.addr(), "")
	fillUI(t, rc, 0)
	dbID := addDB(t, b, "main", srv.port)
	key := func(name string) (page, *html.Node) {
		t.Helper()
		p := b.getPage(t, fmt.Sprintf("/ui/db/%d/key?name=%s", dbID, url.QueryEscape(name)))
		panel := one(t, p.doc, "key-panel")
		return p, panel
	}

	_, panel := key("user:1")
	require.Equal(t, "hash", text(one(t, panel, "key-panel-type")))
	require.Equal(t, "No limit", text(one(t, panel, "key-panel-ttl")))
	require.Regexp(t, `^[0-9]+ B$`, text(one(t, panel, "key-panel-size")))
	value := one(t, panel, "key-value")
	var fields [][2]string
	for _, row := range all(value, "hash-field") {
		fields = append(fields, [2]string{text(one(t, row, "hash-field-name")), text(one(t, row, "hash-field-value"))})
	}
	require.Equal(t, [][2]string{{"id", "1"}, {"lang", "<go>"}, {"name", "Ada"}}, fields)
	require.Empty(t, all(panel, "value-next"))

	_, panel = key("events")
	require.Equal(t, "stream", text(one(t, panel, "key-panel-type")))
	entries := all(one(t, panel, "key-value"), "stream-entry")
	require.Len(t, entries, 2)
	require.Equal(t, "1-1", text(one(t, entries[0], "stream-entry-id")))
	require.Equal(t, []string{"kind: login", "who: ada"}, texts(all(entries[0], "stream-field")))
	require.Equal(t, "2-0", text(one(t, entries[1], "stream-entry-id")))
	require.Equal(t, []string{"kind: logout"}, texts(all(entries[1], "stream-field")))

	_, panel = key("queue")
	require.Equal(t, []string{"a", "b", "c"}, texts(all(one(t, panel, "key-value"), "value-item")))
	_, panel = key("tags")
	require.Equal(t, []string{"x", "y"}, texts(all(one(t, panel, "key-value"), "value-item")))
	_, panel = key("board")
	items := all(one(t, panel, "key-value"), "value-item")
	require.Len(t, items, 2)
	require.Equal(t, "alice", text(one(t, items[0], "value-member")))
	require.Equal(t, "1.5", text(one(t, items[0], "value-score")))
	require.Equal(t, "bob", text(one(t, items[1], "value-member")))

	p, panel := key("greeting")
	require.Equal(t, "string", text(one(t, panel, "key-panel-type")))
	require.Equal(t, `hello <world> & "you"`, text(one(t, panel, "string-value")))
	require.Contains(t, p.raw, "hello &lt;world&gt; &amp;")

	// Binary: escaped text and hex.
	_, panel = key("bin\xff\x00")
	require.Equal(t, `\x00\x01\xfe`, text(one(t, panel, "string-value")))
	require.Equal(t, "0001fe", text(one(t, panel, "string-hex")))

	// The <script> key's panel shows its name as text.
	p, panel = key("<script>alert(1)</script>")
	require.Equal(t, "<script>alert(1)</script>", text(one(t, panel, "key-panel-name")))
	require.NotContains(t, p.raw, "<script>")

	_, panel = key("soon")
	ttl, err := strconv.Atoi(strings.TrimSuffix(text(one(t, panel, "key-panel-ttl")), " s"))
	require.NoError(t, err)
	require.InDelta(t, 5000, ttl, 10)

	// A big hash pages with value-next until every field was shown once.
	_, panel = key("bighash")
	seen := map[string]bool{}
	for range 100 {
		for _, row := range all(one(t, panel, "key-value"), "hash-field") {
			name := text(one(t, row, "hash-field-name"))
			require.False(t, seen[name], "field %s twice", name)
			seen[name] = true
		}
		next := all(panel, "value-next")
		if len(next) == 0 {
			break
		}
		require.Len(t, next, 1)
		p := b.getPage(t, attr(next[0], "href"))
		panel = one(t, p.doc, "key-panel")
	}
	require.Len(t, seen, 300)

	// A key that is gone is the API's 404, in the page.
	res := b.page(t, http.MethodGet, fmt.Sprintf("/ui/db/%d/key?name=gone", dbID), nil)
	require.Equal(t, http.StatusNotFound, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "KEY_NOT_FOUND")
}

func TestUICertificates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ca := newCA(t, "ui-ca")
	cert, key := ca.valid(t, "client")

	p := b.getPage(t, "/ui/certificates")
	require.Empty(t, all(one(t, p.doc, "cert-list"), "cert-row"))

	res := b.page(t, http.MethodPost, "/ui/certificates/client", url.Values{"name": {"laptop <1>"}, "cert": {cert}, "key": {key}})
	require.Equal(t, http.StatusSeeOther, res.status, res.raw)
	require.Equal(t, "/ui/certificates", res.location)
	res = b.page(t, http.MethodPost, "/ui/certificates/ca", url.Values{"name": {"corp CA"}, "certificate": {ca.pem}})
	require.Equal(t, http.StatusSeeOther, res.status, res.raw)

	p = b.getPage(t, "/ui/certificates")
	require.Equal(t, []string{"laptop <1>"}, texts(all(one(t, p.doc, "client-cert-list"), "cert-name")))
	require.Equal(t, []string{"corp CA"}, texts(all(one(t, p.doc, "ca-cert-list"), "cert-name")))
	require.Len(t, all(one(t, p.doc, "cert-list"), "cert-row"), 2)
	require.NotContains(t, p.raw, "PRIVATE KEY")

	// Errors are the API's: a taken name, a malformed certificate.
	res = b.page(t, http.MethodPost, "/ui/certificates/client", url.Values{"name": {"laptop <1>"}, "cert": {cert}, "key": {key}})
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "This client certificate name is already in use.")
	res = b.page(t, http.MethodPost, "/ui/certificates/ca", url.Values{"name": {"bad"}, "certificate": {"not a pem"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "certificate")
	require.Len(t, all(one(t, res.doc, "cert-list"), "cert-row"), 2)

	// The add form offers them.
	form := b.getPage(t, "/ui/db/new")
	require.Contains(t, form.raw, "laptop &lt;1&gt;</option>")
	require.Contains(t, form.raw, "corp CA</option>")

	// Delete both.
	for _, certs := range []string{"client", "ca"} {
		p = b.getPage(t, "/ui/certificates")
		list := one(t, p.doc, certs+"-cert-list")
		del := one(t, list, "cert-delete")
		action := attr(del.Parent, "action")
		require.Regexp(t, `^/ui/certificates/`+certs+`/[0-9]+/delete$`, action)
		res = b.page(t, http.MethodPost, action, url.Values{})
		require.Equal(t, http.StatusSeeOther, res.status, res.raw)
	}
	p = b.getPage(t, "/ui/certificates")
	require.Empty(t, all(one(t, p.doc, "cert-list"), "cert-row"))
}

func TestUIGuard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := startRedis(t, freePort(t))

	for _, path := range []string{"/", "/ui/db/new", "/ui/certificates", "/ui/static/style.css"} {
		res := b.page(t, http.MethodGet, path, nil, "Host", "evil.example")
		require.Equal(t, http.StatusForbidden, res.status, path)
		require.Contains(t, res.raw, "HOST_NOT_ALLOWED")
	}
	form := addForm("x", "127.0.0.1", srv.port)
	for _, h := range [][]string{
		{"Host", "rebind.example:5540"},
		{"Origin", "http://evil.example"},
		{"Origin", "null"},
		{"Sec-Fetch-Site", "cross-site"},
		// Another loopback origin (a page served by some other local port).
		{"Origin", "http://127.0.0.1:1"},
	} {
		res := b.page(t, http.MethodPost, "/ui/db", form, h...)
		require.Equal(t, http.StatusForbidden, res.status, "%v: %s", h, res.raw)
	}
	require.Equal(t, 0, b.connectionCount(t))

	// The page's own origin may post.
	res := b.page(t, http.MethodPost, "/ui/db", form, "Origin", b.url, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusSeeOther, res.status, res.raw)
	require.Equal(t, 1, b.connectionCount(t))
}
