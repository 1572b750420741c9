package console

import (
	"net/http"
)

// front is GET /: the sign-in form, or the subscriptions of a signed-in user.
func (c *Console) front(w http.ResponseWriter, r *http.Request) {
	if _, err := c.seal.session(r); err == nil {
		redirect(w, r, "/console/subscriptions")
		return
	}
	c.render(w, r, http.StatusOK, "signin", map[string]any{"Title": "Sign in"})
}

// signIn checks the key pair with an API call (GET /v1, the account) and keeps it in the
// session cookie. A refused pair shows the form again with the API's message and the key
// (never the secret).
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if pe := parseForm(r); pe != nil {
		c.renderError(w, r, nil, pe)
		return
	}
	key, secret := field(r, "apiKey"), field(r, "secretKey")
	form := map[string]any{"Title": "Sign in", "APIKey": key}
	if key == "" || secret == "" {
		form["Error"] = &pageError{Status: http.StatusBadRequest, Code: "INVALID_FIELD", Message: "both the API key and the secret key are required"}
		c.render(w, r, http.StatusBadRequest, "signin", form)
		return
	}
	account, err := c.apiClient(r, key, secret).GetAccount(r.Context())
	if err != nil {
		pe := c.asPageError(r, err)
		form["Error"] = pe
		c.render(w, r, pe.Status, "signin", form)
		return
	}
	c.seal.setCookie(w, r, session{Key: key, Secret: secret, Account: account.Name, Issued: c.seal.now().UnixNano()})
	redirect(w, r, "/console/subscriptions")
}

// signOut ends the session's API key's sessions (see sealer.signOut) and clears the
// cookie. It needs no session: signing out twice is fine.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if sess, err := c.seal.session(r); err == nil {
		c.seal.signOut(sess.Key)
	}
	clearCookie(w, r)
	redirect(w, r, "/")
}
