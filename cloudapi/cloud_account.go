package cloudapi

import (
	"context"
	"errors"
	"net/http"

	"clouddb"
)

func (s *Server) registerCloudAccountRoutes() {
	s.route("GET /cloud-accounts", s.listCloudAccounts)
	s.route("POST /cloud-accounts", s.createCloudAccount)
	s.route("GET /cloud-accounts/{cloudAccountId}", s.getCloudAccount)
	s.route("PUT /cloud-accounts/{cloudAccountId}", s.updateCloudAccount)
	s.route("DELETE /cloud-accounts/{cloudAccountId}", s.deleteCloudAccount)
}

// cloudAccountView never carries a secret (the secret key, the console user and password
// are write-only). The access key id is shown as it was sent: it identifies the key, and
// Terraform keeps it in its state and compares it with its configuration.
type cloudAccountView struct {
	ID             int    `json:"id"`
	Name           string `json:"name"`
	Provider       string `json:"provider"`
	Status         string `json:"status"`
	AccessKeyID    string `json:"accessKeyId,omitempty"`
	SignInLoginURL string `json:"signInLoginUrl,omitempty"`
	Links          []any  `json:"links"`
}

func newCloudAccountView(c *clouddb.CloudAccount) cloudAccountView {
	return cloudAccountView{ID: c.ID, Name: c.Name, Provider: c.Provider, Status: string(c.Status),
		AccessKeyID: c.AccessKeyID, SignInLoginURL: c.SignInLoginURL, Links: []any{}}
}

// findCloudAccount is a visible cloud account of the caller (the internal one included);
// one being deleted is gone already.
func (s *Server) findCloudAccount(ctx context.Context, tx clouddb.Tx, c *caller, id int) (*clouddb.CloudAccount, error) {
	ca, err := tx.CloudAccount(ctx, c.account.ID, id)
	if errors.Is(err, clouddb.ErrNotFound) || (err == nil && ca.Status == clouddb.CloudAccountDeleting) {
		return nil, clouddb.NotFound(clouddb.ErrTypeCloudAccountNotFound, "cloud account %d not found", id)
	}
	return ca, err
}

func (s *Server) listCloudAccounts(r *http.Request, c *caller) (int, any, error) {
	var cas []*clouddb.CloudAccount
	err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var err error
		cas, err = tx.CloudAccounts(r.Context(), clouddb.CloudAccountFilter{AccountID: c.account.ID})
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	views := make([]cloudAccountView, 0, len(cas))
	for _, ca := range cas {
		if ca.Status != clouddb.CloudAccountDeleting {
			views = append(views, newCloudAccountView(ca))
		}
	}
	return http.StatusOK, map[string]any{"accountId": c.account.ID, "cloudAccounts": views, "links": []any{}}, nil
}

func (s *Server) getCloudAccount(r *http.Request, c *caller) (int, any, error) {
	id, err := pathID(r, "cloudAccountId")
	if err != nil {
		return 0, nil, err
	}
	var ca *clouddb.CloudAccount
	err = s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var txErr error
		ca, txErr = s.findCloudAccount(r.Context(), tx, c, id)
		return txErr
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, newCloudAccountView(ca), nil
}

func (s *Server) createCloudAccount(r *http.Request, c *caller) (int, any, error) {
	var body clouddb.CloudAccountSpec
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandCloudAccountCreate}, body)
}

// checkCloudAccount answers 404 at once for an id the caller cannot see.
func (s *Server) checkCloudAccount(r *http.Request, c *caller) (int, error) {
	id, err := pathID(r, "cloudAccountId")
	if err != nil {
		return 0, err
	}
	return id, s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		_, err := s.findCloudAccount(r.Context(), tx, c, id)
		return err
	})
}

func (s *Server) updateCloudAccount(r *http.Request, c *caller) (int, any, error) {
	id, err := s.checkCloudAccount(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body clouddb.CloudAccountSpec
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandCloudAccountUpdate, CloudAccountID: id}, body)
}

func (s *Server) deleteCloudAccount(r *http.Request, c *caller) (int, any, error) {
	id, err := s.checkCloudAccount(r, c)
	if err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandCloudAccountDelete, CloudAccountID: id}, nil)
}
