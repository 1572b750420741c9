package console

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"clouddb/cloudapi/client"
)

// databaseView is a database as the pages show it.
type databaseView struct {
	*client.Database
	SubscriptionID int
	Href           string
	TLS            bool
	ClientAuth     bool
	// CLI is a redis-cli command line that connects as pasted; "" until the database has
	// an endpoint.
	CLI string
	// Settled is false while the status is one that changes by itself (pending).
	Settled bool
}

func newDatabaseView(subID int, d *client.Database) databaseView {
	v := databaseView{Database: d, SubscriptionID: subID, Href: databaseHref(subID, d.ID)}
	if s := d.Security; s != nil {
		v.TLS = s.EnableTLS != nil && *s.EnableTLS
		v.ClientAuth = s.TLSClientAuthentication != nil && *s.TLSClientAuthentication
	}
	v.CLI = redisCLI(d.PublicEndpoint, password(d), v.TLS, v.ClientAuth)
	v.Settled = d.Status == client.DatabaseActive || d.Status == client.DatabaseError
	return v
}

func databaseHref(subID, dbID int) string {
	return fmt.Sprintf("/console/subscriptions/%d/databases/%d", subID, dbID)
}

func password(d *client.Database) string {
	if d.Security == nil {
		return ""
	}
	return d.Security.Password
}

// caFile is the name the CA certificate is saved under, as the README's examples call it.
const caFile = "redis_ca.pem"

// redisCLI is the command that connects to a database as the default user:
// redis-cli -h HOST -p PORT --user default --pass 'PASSWORD', with --tls --cacert (and a
// client certificate when the database asks for one) when TLS is on.
func redisCLI(endpoint, pass string, useTLS, clientAuth bool) string {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" || port == "" {
		return ""
	}
	line := "redis-cli -h " + shellWord(host) + " -p " + shellWord(port) + " --user default"
	if pass != "" {
		line += " --pass " + shellQuote(pass)
	}
	if useTLS {
		line += " --tls --cacert " + caFile
		if clientAuth {
			line += " --cert client.crt --key client.key"
		}
	}
	return line
}

// shellQuote quotes s for a POSIX shell: inside single quotes nothing is special but the
// quote itself, which is written as quote, backslash, quote, quote.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWord is s bare when it holds only characters no shell treats specially (host
// names, addresses, ports), quoted otherwise.
func shellWord(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return !plainShellChar(r) }) {
		return shellQuote(s)
	}
	return s
}

func plainShellChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_:", r)
}

// formatGB shows a size in GB without trailing zeros.
func formatGB(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + " GB" }

// database is one database: its settings, its endpoint and the redis-cli line.
func (c *Console) database(w http.ResponseWriter, r *http.Request, p *pageContext) {
	subID, dbID, pe := databaseIDs(r)
	if pe != nil {
		c.renderError(w, r, p, pe)
		return
	}
	d, err := p.api.GetDatabase(r.Context(), subID, dbID)
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	v := newDatabaseView(subID, d)
	data := p.data(d.Name)
	data["DB"] = v
	data["Refresh"] = !v.Settled
	c.render(w, r, http.StatusOK, "database", data)
}

func databaseIDs(r *http.Request) (int, int, *pageError) {
	subID, pe := pathID(r, "sub")
	if pe != nil {
		return 0, 0, pe
	}
	dbID, pe := pathID(r, "db")
	return subID, dbID, pe
}

// newDBForm is the create-database form's values, shown again after an error. The
// password is not sent back.
type newDBForm struct {
	Name, Memory string
	TLS          bool
}

// newDatabase is the create-database form.
func (c *Console) newDatabase(w http.ResponseWriter, r *http.Request, p *pageContext) {
	c.newDatabasePage(w, r, p, http.StatusOK, newDBForm{Memory: "1"}, nil)
}

func (c *Console) newDatabasePage(w http.ResponseWriter, r *http.Request, p *pageContext, status int, form newDBForm, formErr *pageError) {
	subID, pe := pathID(r, "sub")
	if pe != nil {
		c.renderError(w, r, p, pe)
		return
	}
	sub, err := p.api.GetSubscription(r.Context(), subID)
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	data := p.data("New database")
	data["Subscription"] = sub
	data["Form"] = form
	data["Error"] = formErr
	c.render(w, r, status, "newdb", data)
}

// createDatabase creates a database from the form (a generated password when none is
// given: the API requires one) and goes to its task; a refusal shows the form again with
// the API's message.
func (c *Console) createDatabase(w http.ResponseWriter, r *http.Request, p *pageContext) {
	subID, pe := pathID(r, "sub")
	if pe == nil {
		pe = parseForm(r)
	}
	if pe != nil {
		c.renderError(w, r, p, pe)
		return
	}
	form := newDBForm{Name: field(r, "name"), Memory: field(r, "memoryLimitInGb"), TLS: r.PostForm.Get("enableTls") != ""}
	pass := r.PostForm.Get("password")
	if pass == "" {
		pass = rand.Text()
	}
	body := map[string]any{"name": form.Name, "password": pass}
	if form.Memory != "" {
		body["memoryLimitInGb"] = formNumber(form.Memory)
	}
	if form.TLS {
		body["enableTls"] = true
	}
	var task client.Task
	err := p.api.Do(r.Context(), http.MethodPost, fmt.Sprintf("/subscriptions/%d/databases", subID), body, &task)
	if err == nil {
		err = c.settle(r, p, &task)
	}
	if err != nil {
		c.formError(w, r, p, err, func(fe *pageError) { c.newDatabasePage(w, r, p, fe.Status, form, fe) })
		return
	}
	redirect(w, r, "/console/tasks/"+task.ID)
}

// formNumber is a form's number as JSON: a number when it is a JSON number, else the
// text itself, so that the API's validation names the field and says what it wants.
// (strconv's numbers are not all JSON's: NaN, Inf, +1, 1. and .5 would fail to encode.)
func formNumber(v string) any {
	if v != "" && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') && json.Valid([]byte(v)) {
		return json.Number(v)
	}
	return v
}

// confirmDelete asks before deleting a database.
func (c *Console) confirmDelete(w http.ResponseWriter, r *http.Request, p *pageContext) {
	c.confirmDeletePage(w, r, p, http.StatusOK, nil)
}

func (c *Console) confirmDeletePage(w http.ResponseWriter, r *http.Request, p *pageContext, status int, formErr *pageError) {
	subID, dbID, pe := databaseIDs(r)
	if pe != nil {
		c.renderError(w, r, p, pe)
		return
	}
	d, err := p.api.GetDatabase(r.Context(), subID, dbID)
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	data := p.data("Delete " + d.Name)
	data["DB"] = newDatabaseView(subID, d)
	data["Error"] = formErr
	c.render(w, r, status, "deletedb", data)
}

// deleteDatabase deletes a database and goes to its task.
func (c *Console) deleteDatabase(w http.ResponseWriter, r *http.Request, p *pageContext) {
	subID, dbID, pe := databaseIDs(r)
	if pe != nil {
		c.renderError(w, r, p, pe)
		return
	}
	task, err := p.api.DeleteDatabase(r.Context(), subID, dbID)
	if err == nil {
		err = c.settle(r, p, task)
	}
	if err != nil {
		c.formError(w, r, p, err, func(fe *pageError) { c.confirmDeletePage(w, r, p, fe.Status, fe) })
		return
	}
	redirect(w, r, "/console/tasks/"+task.ID)
}

// formError shows a refused form post again with the API's message (show), except a 401,
// which signs the user out.
func (c *Console) formError(w http.ResponseWriter, r *http.Request, p *pageContext, err error, show func(*pageError)) {
	fe := c.asPageError(r, err)
	if fe.Status == http.StatusUnauthorized {
		c.renderError(w, r, p, fe)
		return
	}
	show(fe)
}

// caCertificate downloads the CA certificate that signed the database's server
// certificate, for redis-cli's --cacert.
func (c *Console) caCertificate(w http.ResponseWriter, r *http.Request, p *pageContext) {
	subID, dbID, pe := databaseIDs(r)
	if pe != nil {
		c.renderError(w, r, p, pe)
		return
	}
	cert, err := p.api.GetDatabaseCertificate(r.Context(), subID, dbID)
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("Content-Disposition", `attachment; filename="`+caFile+`"`)
	_, _ = w.Write([]byte(cert.PublicCertificatePEMString))
}
