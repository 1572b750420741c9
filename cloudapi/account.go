package cloudapi

import (
	"net"
	"net/http"

	"clouddb"
)

func (s *Server) registerAccountRoutes() {
	s.routeUncached("GET /", s.getAccount) // shows the caller's address
	s.route("GET /payment-methods", s.listPaymentMethods)
	s.route("GET /regions", s.listRegions)
	s.route("GET /data-persistence", s.listDataPersistence)
	s.route("GET /database-modules", s.listDatabaseModules)
}

type accountView struct {
	ID               int        `json:"id"`
	Name             string     `json:"name"`
	CreatedTimestamp string     `json:"createdTimestamp"`
	UpdatedTimestamp string     `json:"updatedTimestamp"`
	Key              apiKeyView `json:"key"`
}

type apiKeyView struct {
	Name             string   `json:"name"`
	AccountID        int      `json:"accountId"`
	AccountName      string   `json:"accountName"`
	AllowedSourceIPs []string `json:"allowedSourceIps"`
	CreatedTimestamp string   `json:"createdTimestamp"`
	HTTPSourceIP     string   `json:"httpSourceIp"`
}

func (s *Server) getAccount(r *http.Request, c *caller) (int, any, error) {
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	return http.StatusOK, map[string]any{"account": accountView{
		ID:               c.account.ID,
		Name:             c.account.Name,
		CreatedTimestamp: timestamp(c.account.CreatedAt),
		UpdatedTimestamp: timestamp(c.account.UpdatedAt),
		Key: apiKeyView{
			Name:             c.key.Name,
			AccountID:        c.account.ID,
			AccountName:      c.account.Name,
			AllowedSourceIPs: []string{"0.0.0.0/0"},
			CreatedTimestamp: timestamp(c.key.CreatedAt),
			HTTPSourceIP:     ip,
		},
	}}, nil
}

type paymentMethodView struct {
	ID                 int    `json:"id"`
	Type               string `json:"type"`
	CreditCardEndsWith int    `json:"creditCardEndsWith"`
	NameOnCard         string `json:"nameOnCard"`
	ExpirationMonth    int    `json:"expirationMonth"`
	ExpirationYear     int    `json:"expirationYear"`
}

func (s *Server) listPaymentMethods(r *http.Request, c *caller) (int, any, error) {
	var pms []*clouddb.PaymentMethod
	err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var err error
		pms, err = tx.PaymentMethods(r.Context(), c.account.ID)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	views := make([]paymentMethodView, 0, len(pms))
	for _, p := range pms {
		views = append(views, paymentMethodView{ID: p.ID, Type: p.Type, CreditCardEndsWith: p.CreditCardEndsWith,
			NameOnCard: p.NameOnCard, ExpirationMonth: p.ExpirationMonth, ExpirationYear: p.ExpirationYear})
	}
	return http.StatusOK, map[string]any{"accountId": c.account.ID, "paymentMethods": views, "links": []any{}}, nil
}

type regionView struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Provider string `json:"provider"`
}

// regions are the region names clouddb accepts in placements; every one of them runs on
// this host.
var regions = func() []regionView {
	aws := []string{"us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1", "ap-south-1", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "ap-northeast-2", "sa-east-1"}
	gcp := []string{"us-central1", "us-east1", "us-east4", "us-west1", "europe-west1", "europe-west2", "europe-west3", "asia-east1", "asia-northeast1", "asia-southeast1"}
	var out []regionView
	for _, n := range aws {
		out = append(out, regionView{ID: len(out) + 1, Name: n, Provider: "AWS"})
	}
	for _, n := range gcp {
		out = append(out, regionView{ID: len(out) + 1, Name: n, Provider: "GCP"})
	}
	return out
}()

func (s *Server) listRegions(r *http.Request, c *caller) (int, any, error) {
	return http.StatusOK, map[string]any{"regions": regions}, nil
}

var persistenceDescriptions = map[string]string{
	"none":                    "No data persistence",
	"aof-every-1-second":      "Append only file, fsync every second",
	"aof-every-write":         "Append only file, fsync on every write",
	"snapshot-every-1-hour":   "RDB snapshot every hour",
	"snapshot-every-6-hours":  "RDB snapshot every 6 hours",
	"snapshot-every-12-hours": "RDB snapshot every 12 hours",
}

func (s *Server) listDataPersistence(r *http.Request, c *caller) (int, any, error) {
	type entry struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	out := make([]entry, 0, len(clouddb.DataPersistenceValues))
	for _, n := range clouddb.DataPersistenceValues {
		out = append(out, entry{Name: n, Description: persistenceDescriptions[n]})
	}
	return http.StatusOK, map[string]any{"dataPersistence": out}, nil
}

// listDatabaseModules lists no module: every database is a plain redis-server.
func (s *Server) listDatabaseModules(r *http.Request, c *caller) (int, any, error) {
	return http.StatusOK, map[string]any{"modules": []any{}}, nil
}
