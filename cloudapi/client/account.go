package client

import (
	"context"
	"net/http"
	"time"
)

// Account is GET / (the caller's account and key).
type Account struct {
	ID               int         `json:"id"`
	Name             string      `json:"name"`
	CreatedTimestamp time.Time   `json:"createdTimestamp"`
	UpdatedTimestamp time.Time   `json:"updatedTimestamp"`
	Key              *AccountKey `json:"key,omitempty"`
}

// AccountKey describes the API key a request was made with.
type AccountKey struct {
	Name             string    `json:"name"`
	AccountID        int       `json:"accountId"`
	AccountName      string    `json:"accountName"`
	AllowedSourceIPs []string  `json:"allowedSourceIps"`
	CreatedTimestamp time.Time `json:"createdTimestamp"`
	HTTPSourceIP     string    `json:"httpSourceIp"`
}

// PaymentMethod is an entry of GET /payment-methods. CreditCardEndsWith is a number: the
// OpenAPI example shows a string, which the official client cannot decode.
type PaymentMethod struct {
	ID                 int    `json:"id"`
	Type               string `json:"type"`
	CreditCardEndsWith int    `json:"creditCardEndsWith"`
	NameOnCard         string `json:"nameOnCard"`
	ExpirationMonth    int    `json:"expirationMonth"`
	ExpirationYear     int    `json:"expirationYear"`
}

// Region is an entry of GET /regions.
type Region struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Provider string `json:"provider"`
}

// DataPersistence is an entry of GET /data-persistence.
type DataPersistence struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// GetAccount reads the caller's account.
func (c *Client) GetAccount(ctx context.Context) (*Account, error) {
	var out struct {
		Account Account `json:"account"`
	}
	if err := c.Do(ctx, http.MethodGet, "/", nil, &out); err != nil {
		return nil, err
	}
	return &out.Account, nil
}

// ListPaymentMethods lists the account's payment methods.
func (c *Client) ListPaymentMethods(ctx context.Context) ([]PaymentMethod, error) {
	var out struct {
		PaymentMethods []PaymentMethod `json:"paymentMethods"`
	}
	if err := c.Do(ctx, http.MethodGet, "/payment-methods", nil, &out); err != nil {
		return nil, err
	}
	return out.PaymentMethods, nil
}

// ListRegions lists the regions subscriptions may be placed in.
func (c *Client) ListRegions(ctx context.Context) ([]Region, error) {
	var out struct {
		Regions []Region `json:"regions"`
	}
	if err := c.Do(ctx, http.MethodGet, "/regions", nil, &out); err != nil {
		return nil, err
	}
	return out.Regions, nil
}

// ListDataPersistence lists the dataPersistence values.
func (c *Client) ListDataPersistence(ctx context.Context) ([]DataPersistence, error) {
	var out struct {
		DataPersistence []DataPersistence `json:"dataPersistence"`
	}
	if err := c.Do(ctx, http.MethodGet, "/data-persistence", nil, &out); err != nil {
		return nil, err
	}
	return out.DataPersistence, nil
}

// ListModules lists the modules databases may enable.
func (c *Client) ListModules(ctx context.Context) ([]Module, error) {
	var out struct {
		Modules []Module `json:"modules"`
	}
	if err := c.Do(ctx, http.MethodGet, "/database-modules", nil, &out); err != nil {
		return nil, err
	}
	return out.Modules, nil
}
