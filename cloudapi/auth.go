package cloudapi

import (
	"errors"
	"net/http"

	"clouddb"
)

// caller is the authenticated account and key of a request.
type caller struct {
	account *clouddb.Account
	key     *clouddb.APIKey
}

var errUnauthorized = clouddb.Errorf(http.StatusUnauthorized, clouddb.ErrTypeUnauthorized,
	"authentication failed: send a valid x-api-key and x-api-secret-key")

// authenticate checks the key pair. An unknown key and a wrong secret get the same answer,
// and a secret is compared in constant time on its digest.
func (s *Server) authenticate(r *http.Request) (*caller, error) {
	key, secret := r.Header.Get("x-api-key"), r.Header.Get("x-api-secret-key")
	if key == "" || secret == "" {
		return nil, errUnauthorized
	}
	var c caller
	if e, ok := s.auth.get(key, s.Now()); ok {
		c = caller{account: e.account, key: e.key}
		return s.authorize(r, &c, secret)
	}
	err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		k, err := tx.APIKey(r.Context(), key)
		if err != nil {
			return err
		}
		a, err := tx.Account(r.Context(), k.AccountID)
		if err != nil {
			return err
		}
		c = caller{account: a, key: k}
		return nil
	})
	if errors.Is(err, clouddb.ErrNotFound) {
		clouddb.DigestSecret(secret) // same work as a known key
		return nil, errUnauthorized
	} else if err != nil {
		return nil, err
	}
	s.auth.put(key, authEntry{key: c.key, account: c.account, at: s.Now()})
	return s.authorize(r, &c, secret)
}

// authorize checks the secret, the plan and the key's role.
func (s *Server) authorize(r *http.Request, c *caller, secret string) (*caller, error) {
	if !c.key.MatchSecret(secret) {
		return nil, errUnauthorized
	}
	if !c.account.Plan.APIEnabled() {
		return nil, clouddb.Forbidden(clouddb.ErrTypeUnsupportedPlan,
			"the API is available for flexible and annual plans only; this account is on the %s plan", c.account.Plan)
	}
	if c.key.Role == clouddb.RoleViewer && r.Method != http.MethodGet {
		return nil, clouddb.Forbidden(clouddb.ErrTypeForbidden, "this API key is read-only")
	}
	return c, nil
}
