package browser

import (
	"bytes"
	"context"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"clouddb"
)

// The web UI: server-rendered html/template pages at the root of the browser listener,
// behind the same Host/Origin guard as the API (serveHTTP checks every request). The
// pages read and write through the API's own handlers, called in process with a request
// built from the form or the query, so they validate, test and answer exactly as the API
// does. Forms POST to /ui/... and redirect (Post/Redirect/Get); a failed POST shows the
// form again with the API's message. No JavaScript: plain links and forms.
//
//	GET  /                          databases, with their status
//	GET  /ui/db/new                 the add-database form
//	POST /ui/db                     add a database → the key browser of the new record
//	POST /ui/db/{id}/delete         delete a record → /
//	GET  /ui/db/{id}                key browser: ?match=&type=&cursor=
//	GET  /ui/db/{id}/key            key panel: ?name=&cursor=
//	GET  /ui/certificates           client certificate pairs and CA certificates
//	POST /ui/certificates/client    add a pair; POST /ui/certificates/client/{id}/delete
//	POST /ui/certificates/ca        add a CA;   POST /ui/certificates/ca/{id}/delete
//	GET  /ui/static/...             the stylesheet

//go:embed ui
var uiFiles embed.FS

// uiPages holds one template set per page, each with the layout.
var uiPages = func() map[string]*template.Template {
	funcs := template.FuncMap{"show": show, "keyHref": keyHref}
	pages := map[string]*template.Template{}
	for _, p := range []string{"databases", "add", "keys", "key", "certificates", "error"} {
		pages[p] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(uiFiles, "ui/layout.html", "ui/"+p+".html"))
	}
	return pages
}()

// uiSecurityHeaders forbid scripts, framing (clickjacking) and leaking the page's URLs
// (they hold key names) in a Referer to another origin. same-origin, not no-referrer:
// under no-referrer Chromium sends "Origin: null" with the page's own form posts, which
// the listener's Origin guard refuses.
func uiSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

func (s *Server) registerUIRoutes() {
	static, err := fs.Sub(uiFiles, "ui/static")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	s.mux.Handle("GET /ui/static/", files)

	// Form posts: besides the listener's guard, refuse what a browser marks as
	// cross-origin (Sec-Fetch-Site, Origin): a loopback page on another port is a
	// different origin.
	cop := http.NewCrossOriginProtection()
	post := func(pattern string, h func(w http.ResponseWriter, r *http.Request)) {
		s.mux.Handle(pattern, cop.Handler(http.HandlerFunc(h)))
	}
	s.mux.HandleFunc("GET /{$}", s.uiDatabases)
	s.mux.HandleFunc("GET /ui/db/new", s.uiAddForm)
	post("POST /ui/db", s.uiAdd)
	post("POST /ui/db/{id}/delete", s.uiDelete)
	s.mux.HandleFunc("GET /ui/db/{id}", s.uiKeys)
	s.mux.HandleFunc("GET /ui/db/{id}/key", s.uiKey)
	s.mux.HandleFunc("GET /ui/certificates", s.uiCertificates)
	post("POST /ui/certificates/client", s.uiAddPair)
	post("POST /ui/certificates/client/{id}/delete", s.uiDeletePair)
	post("POST /ui/certificates/ca", s.uiAddCA)
	post("POST /ui/certificates/ca/{id}/delete", s.uiDeleteCA)
}

// render writes a page; the template is executed into a buffer first so that a failure
// cannot leave half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	var buf bytes.Buffer
	if err := uiPages[page].Execute(&buf, data); err != nil {
		s.logger.Error("browser: rendering a page", "page", page, "path", r.URL.Path, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	uiSecurityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// uiError is an error as a page shows it: the API's status, code, message and field.
type uiError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

// asUIError turns err into what the API would have answered; internal errors are
// logged and shown as "internal error", as the API does.
func (s *Server) asUIError(r *http.Request, err error) *uiError {
	var fe *fieldError
	out := &uiError{}
	if errors.As(err, &fe) {
		out.Field = fe.field
	}
	e := clouddb.AsError(err)
	if e == nil {
		s.logger.Error("browser: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		e = clouddb.Errorf(http.StatusInternalServerError, clouddb.ErrTypeGeneral, "internal error")
	}
	out.Status, out.Code, out.Message = e.Status, e.Type, e.Description
	return out
}

// renderError shows a page that could not be built (an unknown record, a database that
// does not answer) with the API's error.
func (s *Server) renderError(w http.ResponseWriter, r *http.Request, err error) {
	ue := s.asUIError(r, err)
	s.render(w, r, ue.Status, "error", map[string]any{"Title": "Error", "Error": ue})
}

// call runs an API handler in process on a request derived from r: the same context,
// the given path values and query, and a JSON body when body is not nil.
func call(r *http.Request, h handler, path map[string]string, query url.Values, body any) (any, error) {
	req := r.Clone(r.Context())
	req.URL = &url.URL{Path: r.URL.Path, RawQuery: query.Encode()}
	req.Body = http.NoBody
	req.ContentLength = 0
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		req.Body = readCloser{bytes.NewReader(b)}
		req.ContentLength = int64(len(b))
	}
	for k, v := range path {
		req.SetPathValue(k, v)
	}
	_, out, err := h(req)
	return out, err
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// --- databases ---

type dbRow struct {
	connectionView
	Address string
	Status  string
	OK      bool
	Tested  bool
}

func address(v connectionView) string {
	switch v.ConnectionType {
	case typeCluster:
		parts := make([]string, 0, len(v.SeedNodes))
		for _, e := range v.SeedNodes {
			parts = append(parts, e.addr())
		}
		return strings.Join(parts, ", ")
	case typeSentinel:
		addr := endpoint{Host: v.SentinelHost, Port: v.SentinelPort}.addr()
		if v.SentinelMaster != nil {
			addr += " / " + v.SentinelMaster.ServiceName
		}
		return addr
	}
	return endpoint{Host: v.Host, Port: v.Port}.addr()
}

// uiDatabases lists the records. Each row's status is its last successful connection
// test; ?test={id} tests that record now (read-only: nothing is saved) and shows whether
// it is reachable.
func (s *Server) uiDatabases(w http.ResponseWriter, r *http.Request) {
	out, err := call(r, s.listConnections, nil, nil, nil)
	if err != nil {
		s.renderError(w, r, err)
		return
	}
	views := out.(map[string]any)["dbs"].([]connectionView)
	test := r.URL.Query().Get("test")
	rows := make([]dbRow, 0, len(views))
	for _, v := range views {
		row := dbRow{connectionView: v, Address: address(v)}
		switch {
		case test == strconv.Itoa(v.ID):
			row.Tested = true
			if res, terr := call(r, s.testConnection, map[string]string{"id": test}, nil, nil); terr != nil {
				row.Status = "unreachable: " + s.asUIError(r, terr).Message
			} else {
				row.OK = true
				row.Status = "reachable"
				if tv := res.(testView); tv.Version != "" {
					row.Status += ", Redis " + tv.Version
				}
			}
		case v.LastConnection != "":
			row.OK = true
			row.Status = "last connected " + uiTime(v.LastConnection)
		default:
			row.Status = "never tested"
		}
		rows = append(rows, row)
	}
	s.render(w, r, http.StatusOK, "databases", map[string]any{"Title": "Databases", "DBs": rows})
}

// addForm holds the add-database form's values, to show them again after an error.
// Secrets are not sent back.
type addForm struct {
	Name, ConnectionType, Host, Port, Username     string
	ServiceName, MasterUsername                    string
	UseTLS, VerifyServerCert                       bool
	CACert, ClientCert                             string
	CAs, Pairs                                     []certificateView
	Error                                          *uiError
	Title                                          string
	ConnectionTypes                                []string
	NewCAName, NewCACert, NewPairName, NewPairCert string
}

func (s *Server) addFormData(r *http.Request, f *addForm) error {
	f.Title = "Add database"
	f.ConnectionTypes = []string{typeStandalone, typeCluster, typeSentinel}
	cas, err := s.store.caCertificates(r.Context())
	if err != nil {
		return err
	}
	for _, c := range cas {
		f.CAs = append(f.CAs, certificateView{ID: c.ID, Name: c.Name})
	}
	pairs, err := s.store.certificates(r.Context())
	if err != nil {
		return err
	}
	for _, c := range pairs {
		f.Pairs = append(f.Pairs, certificateView{ID: c.ID, Name: c.Name})
	}
	return nil
}

func (s *Server) uiAddForm(w http.ResponseWriter, r *http.Request) {
	f := &addForm{ConnectionType: typeStandalone, Host: "127.0.0.1", Port: "6379"}
	if err := s.addFormData(r, f); err != nil {
		s.renderError(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "add", f)
}

// formInt is a form's number as JSON: a number when it is one, else the text itself, so
// that the API's validation names the field and says what it wants.
func formInt(v string) any {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		return n
	}
	return v
}

// connectionBody builds the POST /api/db body from the add form: the fields of the
// chosen connection type, as the API names them.
func connectionBody(f url.Values) map[string]any {
	body := map[string]any{"name": f.Get("name"), "connectionType": f.Get("connectionType")}
	set := func(m map[string]any, k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	var port any
	if p := f.Get("port"); p != "" {
		port = formInt(p)
	}
	switch f.Get("connectionType") {
	case typeCluster:
		node := map[string]any{"host": f.Get("host")}
		if port != nil {
			node["port"] = port
		}
		body["seedNodes"] = []any{node}
		set(body, "username", f.Get("username"))
		set(body, "password", f.Get("password"))
	case typeSentinel:
		body["sentinelHost"] = f.Get("host")
		if port != nil {
			body["sentinelPort"] = port
		}
		set(body, "sentinelUsername", f.Get("username"))
		set(body, "sentinelPassword", f.Get("password"))
		m := map[string]any{"serviceName": f.Get("serviceName")}
		set(m, "username", f.Get("masterUsername"))
		set(m, "authPass", f.Get("masterPassword"))
		body["sentinelMaster"] = m
	default:
		body["host"] = f.Get("host")
		if port != nil {
			body["port"] = port
		}
		set(body, "username", f.Get("username"))
		set(body, "password", f.Get("password"))
	}
	if f.Get("useTls") != "" {
		t := map[string]any{"useTls": true}
		if f.Get("verifyServerCert") != "" {
			t["verifyServerCert"] = true
		}
		switch ca := f.Get("caCert"); {
		case ca == "new":
			t["caCert"] = map[string]any{"new": map[string]any{"name": f.Get("newCaName"), "certificate": f.Get("newCaCert")}}
		case ca != "":
			t["caCert"] = map[string]any{"id": formInt(ca)}
		}
		switch pair := f.Get("clientCert"); {
		case pair == "new":
			t["clientAuth"] = true
			t["clientCertificateKeyPair"] = map[string]any{"new": map[string]any{"name": f.Get("newPairName"), "cert": f.Get("newPairCert"), "key": f.Get("newPairKey")}}
		case pair != "":
			t["clientAuth"] = true
			t["clientCertificateKeyPair"] = map[string]any{"id": formInt(pair)}
		}
		body["tls"] = t
	}
	return body
}

// uiAdd creates a record as POST /api/db does (tested first) and redirects to its key
// browser; on error it shows the form again with the API's message.
func (s *Server) uiAdd(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, clouddb.Invalid(clouddb.ErrTypeMalformedBody, "malformed form: %v", err))
		return
	}
	f := r.PostForm
	out, err := call(r, s.createConnection, nil, nil, connectionBody(f))
	if err == nil {
		http.Redirect(w, r, "/ui/db/"+strconv.Itoa(out.(connectionView).ID), http.StatusSeeOther)
		return
	}
	form := &addForm{
		Name: f.Get("name"), ConnectionType: f.Get("connectionType"), Host: f.Get("host"), Port: f.Get("port"),
		Username: f.Get("username"), ServiceName: f.Get("serviceName"), MasterUsername: f.Get("masterUsername"),
		UseTLS: f.Get("useTls") != "", VerifyServerCert: f.Get("verifyServerCert") != "",
		CACert: f.Get("caCert"), ClientCert: f.Get("clientCert"),
		NewCAName: f.Get("newCaName"), NewCACert: f.Get("newCaCert"), NewPairName: f.Get("newPairName"), NewPairCert: f.Get("newPairCert"),
		Error: s.asUIError(r, err),
	}
	if derr := s.addFormData(r, form); derr != nil {
		s.renderError(w, r, derr)
		return
	}
	s.render(w, r, form.Error.Status, "add", form)
}

func (s *Server) uiDelete(w http.ResponseWriter, r *http.Request) {
	if _, err := call(r, s.deleteConnection, map[string]string{"id": r.PathValue("id")}, nil, nil); err != nil {
		s.renderError(w, r, err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// --- keys ---

// keyTypes are the types the key browser's filter offers.
var keyTypes = []string{"string", "hash", "list", "set", "zset", "stream", "ReJSON-RL"}

type keyRow struct {
	keyView
	Href string
}

// uiKeys is the key browser: a page of SCAN with the key filter, the counts and a link
// to the next page.
func (s *Server) uiKeys(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	out, err := call(r, s.getConnection, map[string]string{"id": id}, nil, nil)
	if err != nil {
		s.renderError(w, r, err)
		return
	}
	db := out.(connectionView)
	q := r.URL.Query()
	match, typ, cursor := q.Get("match"), q.Get("type"), q.Get("cursor")
	data := map[string]any{
		"Title": db.Name + " — keys", "DB": db, "Address": address(db),
		"Match": match, "Type": typ, "Types": keyTypes,
	}
	query := url.Values{"match": {match}, "type": {typ}, "cursor": {cursor}}
	res, err := call(r, s.scanKeys, map[string]string{"id": id}, query, nil)
	if err != nil {
		ue := s.asUIError(r, err)
		data["Error"] = ue
		s.render(w, r, ue.Status, "keys", data)
		return
	}
	page := res.(keysView)
	rows := make([]keyRow, 0, len(page.Keys))
	for _, k := range page.Keys {
		rows = append(rows, keyRow{keyView: k, Href: keyHref(db.ID, string(k.Name), "")})
	}
	// The API's scanned is this request's (RedisInsight's meaning); the page shows the
	// whole listing's so far, as RedisInsight's browser adds it up, and never more than
	// the keys there are.
	prior, _ := strconv.ParseInt(q.Get("scanned"), 10, 64)
	scanned := min(max(prior, 0)+int64(page.Scanned), int64(page.Total))
	data["Keys"], data["Total"], data["Scanned"] = rows, page.Total, scanned
	if page.Cursor != "0" {
		next := url.Values{"match": {match}, "type": {typ}, "cursor": {page.Cursor}, "scanned": {strconv.FormatInt(scanned, 10)}}
		data["Next"] = "/ui/db/" + id + "?" + next.Encode()
	}
	s.render(w, r, http.StatusOK, "keys", data)
}

// keyHref is the key panel's URL of a key (the name in the query, byte for byte).
func keyHref(dbID int, name, cursor string) string {
	q := url.Values{"name": {name}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return "/ui/db/" + strconv.Itoa(dbID) + "/key?" + q.Encode()
}

// uiKey is the key panel: type, TTL, size and a page of the value.
func (s *Server) uiKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	out, err := call(r, s.getConnection, map[string]string{"id": id}, nil, nil)
	if err != nil {
		s.renderError(w, r, err)
		return
	}
	db := out.(connectionView)
	q := r.URL.Query()
	name, cursor := q.Get("name"), q.Get("cursor")
	data := map[string]any{"Title": db.Name + " — " + show(name).Text, "DB": db, "Name": name, "Cursor": cursor}
	res, err := call(r, s.getKey, map[string]string{"id": id, "key": name}, url.Values{"cursor": {cursor}}, nil)
	if err != nil {
		ue := s.asUIError(r, err)
		data["Error"] = ue
		s.render(w, r, ue.Status, "key", data)
		return
	}
	v := res.(*keyValueView)
	data["Key"] = v
	data["Size"] = s.keySize(r.Context(), id, name)
	if v.Truncated {
		data["Next"] = keyHref(db.ID, name, v.Cursor)
	}
	if v.Type == "string" {
		if str, ok := v.Value.(bstr); ok {
			data["String"] = show(string(str))
		}
	}
	s.render(w, r, http.StatusOK, "key", data)
}

// keySize is the key's MEMORY USAGE as the key listing reports it, nil when the server
// does not tell it.
func (s *Server) keySize(ctx context.Context, id, name string) *int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return nil
	}
	req.SetPathValue("id", id)
	ctx, cancel := context.WithTimeout(ctx, browseTimeout)
	defer cancel()
	c, d, err := s.open(ctx, req)
	if err != nil {
		return nil
	}
	cl := d.client(c)
	defer cl.Close()
	n, err := cl.MemoryUsage(ctx, name).Result()
	if err != nil {
		return nil
	}
	return &n
}

// shown is a byte string as a page shows it: the text when it is printable UTF-8,
// else an escaped form (Go quoting: \x00, \n, \u2028, ...) and its hex.
type shown struct {
	Text   string
	Binary bool
	Hex    string
}

// maxHexBytes caps the bytes shown in hex.
const maxHexBytes = 4 << 10

func show(s string) shown {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r) && r != ' ' && r != '\n' && r != '\t'
	}) {
		return shown{Text: s}
	}
	q := strconv.Quote(s)
	h := []byte(s)
	suffix := ""
	if len(h) > maxHexBytes {
		h, suffix = h[:maxHexBytes], " …"
	}
	return shown{Text: q[1 : len(q)-1], Binary: true, Hex: hex.EncodeToString(h) + suffix}
}

// --- certificates ---

type certPage struct {
	Title      string
	Pairs, CAs []certificateView
	Error      *uiError
	Form       string // "client" or "ca": the form the error is about
	PairName   string
	CAName     string
}

func (s *Server) certPageData(r *http.Request, p *certPage) error {
	p.Title = "Certificates"
	out, err := call(r, s.listCertificates, nil, nil, nil)
	if err != nil {
		return err
	}
	p.Pairs = out.(map[string]any)["certificates"].([]certificateView)
	out, err = call(r, s.listCACertificates, nil, nil, nil)
	if err != nil {
		return err
	}
	p.CAs = out.([]certificateView)
	return nil
}

func (s *Server) uiCertificates(w http.ResponseWriter, r *http.Request) {
	p := &certPage{}
	if err := s.certPageData(r, p); err != nil {
		s.renderError(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "certificates", p)
}

// certAction runs a certificate handler and redirects to the certificates page, or shows
// the page with the error.
func (s *Server) certAction(w http.ResponseWriter, r *http.Request, form string, h handler, path map[string]string, body map[string]any) {
	if _, err := call(r, h, path, nil, body); err != nil {
		p := &certPage{Error: s.asUIError(r, err), Form: form}
		if body != nil && form == "client" {
			p.PairName, _ = body["name"].(string)
		} else if body != nil {
			p.CAName, _ = body["name"].(string)
		}
		if derr := s.certPageData(r, p); derr != nil {
			s.renderError(w, r, derr)
			return
		}
		s.render(w, r, p.Error.Status, "certificates", p)
		return
	}
	http.Redirect(w, r, "/ui/certificates", http.StatusSeeOther)
}

func (s *Server) uiAddPair(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, clouddb.Invalid(clouddb.ErrTypeMalformedBody, "malformed form: %v", err))
		return
	}
	body := map[string]any{"name": r.PostForm.Get("name"), "cert": r.PostForm.Get("cert"), "key": r.PostForm.Get("key")}
	s.certAction(w, r, "client", s.createCertificate, nil, body)
}

func (s *Server) uiDeletePair(w http.ResponseWriter, r *http.Request) {
	s.certAction(w, r, "client", s.deleteCertificate, map[string]string{"id": r.PathValue("id")}, nil)
}

func (s *Server) uiAddCA(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, clouddb.Invalid(clouddb.ErrTypeMalformedBody, "malformed form: %v", err))
		return
	}
	body := map[string]any{"name": r.PostForm.Get("name"), "certificate": r.PostForm.Get("certificate")}
	s.certAction(w, r, "ca", s.createCACertificate, nil, body)
}

func (s *Server) uiDeleteCA(w http.ResponseWriter, r *http.Request) {
	s.certAction(w, r, "ca", s.deleteCACertificate, map[string]string{"id": r.PathValue("id")}, nil)
}

// uiTime formats a record's RFC 3339 time for a page.
func uiTime(v string) string {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return v
	}
	return t.Format("2006-01-02 15:04:05 MST")
}
