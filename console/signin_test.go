package console

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi"
)

func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()

	p := b.getOK("/")
	requireSecurityHeaders(t, p.header)
	form := one(t, p.doc, "sign-in-form")
	require.Equal(t, "post", attr(form, "method"))
	require.Equal(t, "/console/signin", attr(form, "action"))
	require.Empty(t, all(p.doc, "sign-out"), "no sign-out button before signing in")

	// Pages need a session: without one they send the browser to the sign-in form.
	for _, path := range []string{"/console/subscriptions", "/console/tasks", "/console/subscriptions/1", "/console/tasks/x"} {
		res := b.get(path)
		require.Equal(t, http.StatusSeeOther, res.status, path)
		require.Equal(t, "/", res.location, path)
	}

	// A wrong secret: the API's message next to the form, the key kept, the secret not.
	res := b.post("/console/signin", url.Values{"apiKey": {ownerKey}, "secretKey": {"wrong-secret-9876"}})
	require.Equal(t, http.StatusUnauthorized, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "authentication failed: send a valid x-api-key and x-api-secret-key")
	require.Contains(t, res.raw, `value="`+ownerKey+`"`)
	require.NotContains(t, res.raw, "wrong-secret-9876")
	require.Empty(t, b.cookie())

	res = b.post("/console/signin", url.Values{"apiKey": {ownerKey}, "secretKey": {""}})
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "both the API key and the secret key are required")

	// The right pair: a session cookie, sealed.
	res = b.post("/console/signin", url.Values{"apiKey": {ownerKey}, "secretKey": {ownerSecret}})
	require.Equal(t, http.StatusSeeOther, res.status, res.raw)
	require.Equal(t, "/console/subscriptions", res.location)
	requireSecurityHeaders(t, res.header)
	setCookie := res.header.Get("Set-Cookie")
	require.Contains(t, setCookie, sessionCookie+"=")
	require.Contains(t, setCookie, "Path=/")
	require.Contains(t, setCookie, "HttpOnly")
	require.Contains(t, setCookie, "SameSite=Strict")
	require.NotContains(t, setCookie, "Secure", "plain HTTP: a Secure cookie would never come back")
	require.NotContains(t, strings.ToLower(setCookie), "expires", "a session cookie")
	require.NotContains(t, strings.ToLower(setCookie), "max-age", "a session cookie")
	value := b.cookie()
	require.NotEmpty(t, value)
	sealed, err := base64.RawURLEncoding.DecodeString(value)
	require.NoError(t, err)
	for _, plain := range []string{ownerSecret, ownerKey, "main"} {
		require.NotContains(t, string(sealed), plain)
		require.NotContains(t, value, plain)
	}

	p = b.getOK("/console/subscriptions")
	require.Equal(t, "main", text(one(t, p.doc, "account")))
	one(t, p.doc, "sign-out")
	res = b.get("/")
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/console/subscriptions", res.location)

	// Signing out clears the cookie: the pages are closed again.
	res = b.post("/console/signout", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/", res.location)
	require.Contains(t, res.header.Get("Set-Cookie"), "Max-Age=0")
	require.Empty(t, b.cookie())
	res = b.get("/console/subscriptions")
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/", res.location)
	one(t, b.getOK("/").doc, "sign-in-form")

	e.requireNoSecret(ownerSecret, "wrong-secret-9876")
}

// The console calls the API from the browser's address: its login throttle counts the
// console's failed sign-ins as that address's.
func TestSignInThrottled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *cloudapi.Server) { s.LoginFailures = 2 })
	b := e.browser()
	for range 2 {
		res := b.post("/console/signin", url.Values{"apiKey": {ownerKey}, "secretKey": {"not-it-0000000000"}})
		require.Equal(t, http.StatusUnauthorized, res.status)
	}
	res := b.post("/console/signin", url.Values{"apiKey": {ownerKey}, "secretKey": {ownerSecret}})
	require.Equal(t, http.StatusTooManyRequests, res.status, res.raw)
	require.Contains(t, text(one(t, res.doc, "form-error")), "failed authentications from this address")
	require.Empty(t, b.cookie())
}

// GET / with an API key is an API client whose base URL lacks /v1: it gets the account,
// as before the console.
func TestRootWithAPIKeyIsTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.browser().do(http.MethodGet, "/", nil, "x-api-key", ownerKey, "x-api-secret-key", ownerSecret)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	require.Contains(t, res.raw, `"name":"main"`)
	res = e.browser().do(http.MethodGet, "/", nil, "x-api-key", ownerKey)
	require.Equal(t, http.StatusUnauthorized, res.status)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
}

// A session whose key pair the API no longer accepts signs the user out with the API's
// message.
func TestSessionRefusedByTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	u, err := url.Parse(e.srv.URL)
	require.NoError(t, err)
	forged := e.console.seal.seal(session{Key: "gone-key", Secret: "gone-secret", Account: "main", Issued: e.console.seal.now().UnixNano()})
	b.jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: forged, Path: "/"}})
	res := b.get("/console/subscriptions")
	require.Equal(t, http.StatusUnauthorized, res.status)
	one(t, res.doc, "sign-in-form")
	require.Contains(t, text(one(t, res.doc, "form-error")), "authentication failed")
	require.Empty(t, b.cookie(), "signed out")
}

// A form posted from another site is refused before it reaches the API.
func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	b.signIn(ownerKey, ownerSecret)
	for _, h := range [][2]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "http://evil.example"}} {
		res := b.do(http.MethodPost, "/console/subscriptions", url.Values{"name": {"x"}, "dbName": {"db"}, "dbMemory": {"1"}}, h[0], h[1])
		require.Equal(t, http.StatusForbidden, res.status, h[0])
		requireSecurityHeaders(t, res.header)
		require.Contains(t, text(one(t, res.doc, "form-error")), "another site")
	}
	list, err := e.owner.ListSubscriptions(testCtx(t))
	require.NoError(t, err)
	require.Empty(t, list.Subscriptions)
}

// Signing out ends the session, not only the cookie of the browser that signed out: a
// copy of the cookie taken before is refused afterwards, as are the key's other sessions
// that began before it. A session of another key lives on, and signing in again works.
func TestSignOutEndsTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u, err := url.Parse(e.srv.URL)
	require.NoError(t, err)
	a, other, viewer := e.browser(), e.browser(), e.browser()
	a.signIn(ownerKey, ownerSecret)
	other.signIn(ownerKey, ownerSecret)
	viewer.signIn(viewerKey, viewerSecret)
	stolen := a.cookie()
	require.NotEmpty(t, stolen)

	res := a.post("/console/signout", url.Values{})
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Empty(t, a.cookie())

	replay := e.browser()
	replay.jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: stolen, Path: "/"}})
	for _, b := range []*browser{replay, other} {
		for _, path := range []string{"/console/subscriptions", "/console/tasks"} {
			res = b.get(path)
			require.Equal(t, http.StatusSeeOther, res.status, path)
			require.Equal(t, "/", res.location, path)
		}
		res = b.post("/console/subscriptions", url.Values{"name": {"s"}, "dbName": {"d"}, "dbMemory": {"1"}})
		require.Equal(t, http.StatusSeeOther, res.status)
		require.Equal(t, "/", res.location)
		one(t, b.getOK("/").doc, "sign-in-form")
	}
	list, err := e.owner.ListSubscriptions(testCtx(t))
	require.NoError(t, err)
	require.Empty(t, list.Subscriptions, "the replayed cookie created nothing")

	require.Equal(t, "main", text(one(t, viewer.getOK("/console/subscriptions").doc, "account")), "another key's session")
	a.signIn(ownerKey, ownerSecret)
	a.getOK("/console/subscriptions")
}
