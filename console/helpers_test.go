package console

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"clouddb"
	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
	"clouddb/internal/pki"
	"clouddb/internal/uitest"
	"clouddb/sqlite"
	"clouddb/task"
)

// The handler tests run the console on a real cloud API: a SQLite store in a temporary
// directory, a running task engine and the API's handler, mounted as cmd/clouddb mounts
// them. There is no reconciler: subscriptions and databases stay pending unless a test
// moves them through the store (the real-browser test in cmd/clouddb runs it all).

// Key pairs the tests bootstrap: an owner and a viewer of one account, and the owner of
// another.
const (
	ownerKey, ownerSecret   = "owner-key", "owner-secret-0123456789"
	viewerKey, viewerSecret = "viewer-key", "viewer-secret-0123456789"
	otherKey, otherSecret   = "other-key", "other-secret-0123456789"
)

type env struct {
	t       *testing.T
	store   *sqlite.DB
	console *Console
	srv     *httptest.Server
	owner   *client.Client // the API, as the owner key
	// pages is every HTML page the env's browsers received, to check what none shows.
	pages atomic.Pointer[[]string]
}

var portBase atomic.Int32

// newEnv starts the API and the console; opts adjust the API before it starts.
func newEnv(t *testing.T, opts ...func(*cloudapi.Server)) *env {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	e := &env{t: t, store: store}
	e.pages.Store(&[]string{})
	e.bootstrap()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	low := 22000 + int(portBase.Add(1)%40)*100
	engine := &task.Engine{Store: store, Ports: &task.Ports{Low: low, High: low + 99, Host: "127.0.0.1"}, Logger: quiet, PollInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if runErr := engine.Run(ctx); runErr != nil {
			t.Errorf("task engine: %v", runErr)
		}
	}()
	ca, err := pki.New("console test CA")
	require.NoError(t, err)
	api := &cloudapi.Server{Store: store, Tasks: engine, AdvertiseHost: "127.0.0.1", Logger: quiet, CA: ca}
	for _, o := range opts {
		o(api)
	}
	h := api.Handler()
	mux := http.NewServeMux()
	mux.Handle("/", h)
	e.console = New(h, quiet)
	e.console.Register(mux, h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		e.srv.Close()
		cancel()
		<-done
		require.NoError(t, store.Close())
	})
	e.owner = client.New(e.srv.URL+"/v1", ownerKey, ownerSecret, client.WithPollInterval(10*time.Millisecond))
	return e
}

// bootstrap writes the internal cloud account, two flexible accounts with a payment
// method each, and their keys.
func (e *env) bootstrap() {
	ctx := context.Background()
	err := e.store.Update(ctx, func(tx clouddb.Tx) error {
		if err := tx.CreateCloudAccount(ctx, &clouddb.CloudAccount{ID: clouddb.InternalCloudAccountID,
			Name: "Redis Internal Resources", Provider: "AWS", Status: clouddb.CloudAccountActive}); err != nil {
			return err
		}
		accounts := []struct {
			name string
			keys [][2]string
			role []clouddb.APIKeyRole
		}{
			{"main", [][2]string{{ownerKey, ownerSecret}, {viewerKey, viewerSecret}}, []clouddb.APIKeyRole{clouddb.RoleOwner, clouddb.RoleViewer}},
			{"other", [][2]string{{otherKey, otherSecret}}, []clouddb.APIKeyRole{clouddb.RoleOwner}},
		}
		for _, a := range accounts {
			acc := &clouddb.Account{Name: a.name, Plan: clouddb.PlanFlexible}
			if err := tx.CreateAccount(ctx, acc); err != nil {
				return err
			}
			if err := tx.CreatePaymentMethod(ctx, &clouddb.PaymentMethod{AccountID: acc.ID, Type: "Visa", CreditCardEndsWith: 4242,
				NameOnCard: a.name, ExpirationMonth: 12, ExpirationYear: time.Now().Year() + 2}); err != nil {
				return err
			}
			for i, k := range a.keys {
				if err := tx.CreateAPIKey(ctx, &clouddb.APIKey{AccountID: acc.ID, Name: k[0] + "-name", Key: k[0],
					SecretDigest: clouddb.DigestSecret(k[1]), Role: a.role[i]}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	require.NoError(e.t, err)
}

// activate marks a subscription and its databases active through the store, as the
// reconciler would once their servers run.
func (e *env) activate(subID int) {
	e.t.Helper()
	ctx := context.Background()
	require.NoError(e.t, e.store.Update(ctx, func(tx clouddb.Tx) error {
		s, err := tx.Subscription(ctx, 0, subID)
		if err != nil {
			return err
		}
		ok, err := tx.SetSubscriptionStatus(ctx, subID, s.Generation, clouddb.SubscriptionActive)
		if err == nil && !ok {
			err = errStale
		}
		return err
	}))
}

var errStale = errors.New("the subscription changed meanwhile")

// browser is one browser: a cookie jar, and no redirect followed unless asked.
type browser struct {
	e   *env
	hc  *http.Client
	jar *cookiejar.Jar
}

func (e *env) browser() *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(e.t, err)
	return &browser{e: e, jar: jar, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is a fetched page, parsed.
type page struct {
	status   int
	header   http.Header
	raw      string
	doc      *html.Node
	location string
}

// do sends a request; form, when not nil, is posted. header is name, value pairs.
func (b *browser) do(method, path string, form url.Values, header ...string) page {
	t := b.e.t
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.e.srv.URL+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := b.hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	p := page{status: res.StatusCode, header: res.Header, raw: string(raw), location: res.Header.Get("Location")}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		p.doc, err = html.Parse(strings.NewReader(p.raw))
		require.NoError(t, err)
		for {
			old := b.e.pages.Load()
			next := append(append([]string{}, *old...), p.raw)
			if b.e.pages.CompareAndSwap(old, &next) {
				break
			}
		}
	}
	return p
}

func (b *browser) get(path string) page {
	b.e.t.Helper()
	return b.do(http.MethodGet, path, nil)
}

// getOK fetches a page that must be there.
func (b *browser) getOK(path string) page {
	b.e.t.Helper()
	p := b.get(path)
	require.Equal(b.e.t, http.StatusOK, p.status, "GET %s: %s", path, p.raw)
	require.NotNil(b.e.t, p.doc, "GET %s is not HTML", path)
	return p
}

func (b *browser) post(path string, form url.Values) page {
	b.e.t.Helper()
	return b.do(http.MethodPost, path, form)
}

// signIn signs in with a key pair, which must be accepted.
func (b *browser) signIn(key, secret string) {
	b.e.t.Helper()
	p := b.post("/console/signin", url.Values{"apiKey": {key}, "secretKey": {secret}})
	require.Equal(b.e.t, http.StatusSeeOther, p.status, p.raw)
	require.Equal(b.e.t, "/console/subscriptions", p.location)
}

// cookie is the browser's session cookie value, "" when there is none.
func (b *browser) cookie() string {
	u, err := url.Parse(b.e.srv.URL)
	require.NoError(b.e.t, err)
	for _, c := range b.jar.Cookies(u) {
		if c.Name == sessionCookie {
			return c.Value
		}
	}
	return ""
}

// taskID is the task a form post redirected to.
func taskID(t *testing.T, p page) string {
	t.Helper()
	require.Equal(t, http.StatusSeeOther, p.status, p.raw)
	id, ok := strings.CutPrefix(p.location, "/console/tasks/")
	require.True(t, ok, "redirect to %q", p.location)
	return id
}

// requireSecurityHeaders checks the headers every console answer carries.
func requireSecurityHeaders(t *testing.T, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "frame-ancestors 'none'")
	require.NotContains(t, csp, "script-src")
	require.Equal(t, "same-origin", h.Get("Referrer-Policy"))
	require.Equal(t, "no-store", h.Get("Cache-Control"))
}

// The pages' readers by data-testid, shared with the other UI's tests.
var (
	attr = uitest.Attr
	all  = uitest.All
	one  = uitest.One
	text = uitest.Text
)

// refreshes reports whether a page reloads itself.
func refreshes(p page) bool {
	var found bool
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "meta" && strings.EqualFold(attr(n, "http-equiv"), "refresh") {
			found = attr(n, "content") == "2"
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(p.doc)
	return found
}

// requireNoSecret checks that no page the env served holds a secret.
func (e *env) requireNoSecret(secrets ...string) {
	e.t.Helper()
	pages := *e.pages.Load()
	require.NotEmpty(e.t, pages)
	for _, p := range pages {
		for _, s := range secrets {
			require.NotContains(e.t, p, s)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
