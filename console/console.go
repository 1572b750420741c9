// Package console is the web console at / of the API listener: an account signs in with
// an API key pair, sees its subscriptions, their databases and its tasks, and creates and
// deletes databases.
//
// The console is a client of the cloud API, in process: every page reads and writes by
// calling the API's handler with the signed-in key pair (through cloudapi/client), so the
// validation, the errors, the permissions, the login throttle and the rate limit are the
// API's. The key pair lives in a sealed session cookie only (see session.go).
//
// The pages are server-rendered html/template templates and one stylesheet, embedded; no
// JavaScript (Content-Security-Policy default-src 'none'). Forms post and redirect
// (Post/Redirect/Get); a failed post shows the form again with the API's message. Pages
// that show something moving (a task, a pending database) reload themselves every two
// seconds until it settles.
//
//	GET  /                                               sign-in form (signed in: → subscriptions)
//	POST /console/signin                                 check the key pair with the API, set the cookie
//	POST /console/signout                                clear the cookie
//	GET  /console/subscriptions                          the account's subscriptions
//	POST /console/subscriptions                          create one → its task
//	GET  /console/subscriptions/{sub}                    a subscription's databases
//	GET  /console/subscriptions/{sub}/databases/new      the create-database form
//	POST /console/subscriptions/{sub}/databases          create a database → its task
//	GET  /console/subscriptions/{sub}/databases/{db}     a database: endpoint, redis-cli line
//	GET  /console/subscriptions/{sub}/databases/{db}/delete   the delete confirmation
//	POST /console/subscriptions/{sub}/databases/{db}/delete   delete → its task
//	GET  /console/subscriptions/{sub}/databases/{db}/ca.pem   the CA certificate, for --cacert
//	GET  /console/tasks                                  the account's tasks
//	GET  /console/tasks/{id}                             one task, followed to its end
//	GET  /console/static/...                             the stylesheet
package console

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"clouddb/cloudapi/client"
)

//go:embed ui
var uiFiles embed.FS

// pages holds one template set per page, each with the layout.
var pages = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, p := range []string{"signin", "subscriptions", "subscription", "database", "newdb", "deletedb", "tasks", "task", "error"} {
		out[p] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(uiFiles, "ui/layout.html", "ui/"+p+".html"))
	}
	return out
}()

var funcs = template.FuncMap{"progress": taskProgress, "gb": formatGB}

// maxFormBytes bounds a form post: the largest form is a few short fields.
const maxFormBytes = 64 << 10

// Console serves the console's pages.
type Console struct {
	api    http.Handler
	logger *slog.Logger
	seal   *sealer
}

// New returns the console of the cloud API whose handler is api. Its sessions are sealed
// with a key made now: they end with the process.
func New(api http.Handler, logger *slog.Logger) *Console {
	if logger == nil {
		logger = slog.Default()
	}
	return &Console{api: api, logger: logger, seal: newSealer()}
}

// Register adds the console's routes to mux: GET / and everything under /console/.
// GET / with an API key header is no browser: it goes to apiRoot (the API's account
// endpoint, which a client with a base URL without /v1 reaches there).
func (c *Console) Register(mux *http.ServeMux, apiRoot http.Handler) {
	static, err := fs.Sub(uiFiles, "ui/static")
	if err != nil {
		panic(err)
	}
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))

	// Form posts refuse what the browser marks as cross-origin (Sec-Fetch-Site, Origin),
	// on top of the SameSite=Strict cookie.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, &pageError{Status: http.StatusForbidden, Code: "CROSS_ORIGIN_REQUEST",
			Message: "a form of another site was posted to the console: refused"})
	}))
	post := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, cop.Handler(limitForm(h)))
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") != "" || r.Header.Get("x-api-secret-key") != "" {
			apiRoot.ServeHTTP(w, r)
			return
		}
		c.front(w, r)
	})
	post("POST /console/signin", c.signIn)
	post("POST /console/signout", c.signOut)
	mux.HandleFunc("GET /console/subscriptions", c.signedIn(c.subscriptions))
	post("POST /console/subscriptions", c.signedIn(c.createSubscription))
	mux.HandleFunc("GET /console/subscriptions/{sub}", c.signedIn(c.subscription))
	mux.HandleFunc("GET /console/subscriptions/{sub}/databases/new", c.signedIn(c.newDatabase))
	post("POST /console/subscriptions/{sub}/databases", c.signedIn(c.createDatabase))
	mux.HandleFunc("GET /console/subscriptions/{sub}/databases/{db}", c.signedIn(c.database))
	mux.HandleFunc("GET /console/subscriptions/{sub}/databases/{db}/delete", c.signedIn(c.confirmDelete))
	post("POST /console/subscriptions/{sub}/databases/{db}/delete", c.signedIn(c.deleteDatabase))
	mux.HandleFunc("GET /console/subscriptions/{sub}/databases/{db}/ca.pem", c.signedIn(c.caCertificate))
	mux.HandleFunc("GET /console/tasks", c.signedIn(c.tasks))
	mux.HandleFunc("GET /console/tasks/{id}", c.signedIn(c.task))
	// Anything else under /console/ is a page that does not exist, not an API resource.
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, &pageError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "no such page: " + r.URL.Path})
	})
}

func limitForm(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		h(w, r)
	}
}

// securityHeaders forbid scripts, framing, and leaking the pages' URLs in a Referer to
// another origin; no-store because pages show database passwords. same-origin rather than
// no-referrer: under no-referrer Chromium sends "Origin: null" with the page's own form
// posts, which cross-origin protection refuses.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// signedInHandler is a page of a signed-in user, with the API client of the session.
type signedInHandler func(w http.ResponseWriter, r *http.Request, p *pageContext)

// pageContext is what every signed-in page has: the session and its API client.
type pageContext struct {
	sess *session
	api  *client.Client
}

// signedIn runs h with the request's session, or sends the browser to the sign-in page.
func (c *Console) signedIn(h signedInHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := c.seal.session(r)
		if err != nil {
			securityHeaders(w.Header())
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		h(w, r, &pageContext{sess: sess, api: c.apiClient(r, sess.Key, sess.Secret)})
	}
}

// redirect answers a form post with 303 See Other to a page (Post/Redirect/Get).
func redirect(w http.ResponseWriter, r *http.Request, to string) {
	securityHeaders(w.Header())
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// render writes a page; the template is executed into a buffer first so that a failure
// cannot leave half a page. data is the page's; the layout reads Title, Account and
// Refresh from it.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, data map[string]any) {
	var buf bytes.Buffer
	if err := pages[page].Execute(&buf, data); err != nil {
		c.logger.Error("console: rendering a page", "page", page, "path", r.URL.Path, "err", err)
		securityHeaders(w.Header())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// pageError is an error as a page shows it: the API's status, code and description.
type pageError struct {
	Status  int
	Code    string
	Message string
}

// asPageError turns an API call's error into what the page shows. The API's own answers
// (4xx, and its generic 5xx) are shown as it gave them; anything else (the console's own
// failure) is logged and shown as "internal error".
func (c *Console) asPageError(r *http.Request, err error) *pageError {
	var ae *client.Error
	if errors.As(err, &ae) {
		pe := &pageError{Status: ae.StatusCode, Code: ae.Type, Message: ae.Description}
		if pe.Status < 400 || pe.Status > 599 {
			pe.Status = http.StatusBadGateway // a failed task's status that is no error code
		}
		if pe.Message == "" {
			pe.Message = "the API answered " + http.StatusText(ae.StatusCode)
		}
		return pe
	}
	if r.Context().Err() != nil {
		return &pageError{Status: 499, Code: "CLIENT_CLOSED_REQUEST", Message: "the request was cancelled"}
	}
	c.logger.Error("console: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	return &pageError{Status: http.StatusInternalServerError, Code: "GENERAL_ERROR", Message: "internal error"}
}

// renderError shows a page that could not be built. A 401 means the session's key pair
// is no longer accepted (deleted, or the account changed): the user is signed out and
// shown the sign-in form with the API's message.
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, p *pageContext, pe *pageError) {
	if pe.Status == http.StatusUnauthorized {
		clearCookie(w, r)
		c.render(w, r, pe.Status, "signin", map[string]any{"Title": "Sign in", "Error": pe})
		return
	}
	data := map[string]any{"Title": "Error", "Error": pe}
	if p != nil {
		data["Account"] = p.sess.Account
	}
	c.render(w, r, pe.Status, "error", data)
}

// apiError shows the error of an API call on an error page.
func (c *Console) apiError(w http.ResponseWriter, r *http.Request, p *pageContext, err error) {
	c.renderError(w, r, p, c.asPageError(r, err))
}

// data is the map a signed-in page starts from.
func (p *pageContext) data(title string) map[string]any {
	return map[string]any{"Title": title, "Account": p.sess.Account}
}

// parseForm reads a posted form; a body too large or malformed is a 400 with the reason.
func parseForm(r *http.Request) *pageError {
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &pageError{Status: http.StatusRequestEntityTooLarge, Code: "REQUEST_TOO_LARGE", Message: "the form is larger than 64 KiB"}
		}
		return &pageError{Status: http.StatusBadRequest, Code: "BAD_REQUEST", Message: "malformed form: " + err.Error()}
	}
	return nil
}

// field is a form field with surrounding space removed.
func field(r *http.Request, name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
