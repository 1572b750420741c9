package client

import (
	"context"
	"net/http"
)

// Cloud account statuses. A new account is draft, never pending: Terraform's waiter
// fails on pending.
const (
	CloudAccountDraft       = "draft"
	CloudAccountChangeDraft = "change-draft"
	CloudAccountActive      = "active"
)

// InternalCloudAccountID is the service's own resources, visible to every account.
const InternalCloudAccountID = 1

// CloudAccount is GET /cloud-accounts/{id}. Its secrets are never returned.
type CloudAccount struct {
	// ID is the one field the official client does not omit when empty.
	ID       int    `json:"id"`
	Name     string `json:"name,omitempty"`
	Provider string `json:"provider,omitempty"`
	Status   string `json:"status,omitempty"`
	// AccessKeyID reads back as it was sent; it is absent for the internal account.
	AccessKeyID    string `json:"accessKeyId,omitempty"`
	SignInLoginURL string `json:"signInLoginUrl,omitempty"`
}

// CloudAccountList is GET /cloud-accounts.
type CloudAccountList struct {
	AccountID     int            `json:"accountId"`
	CloudAccounts []CloudAccount `json:"cloudAccounts"`
}

// CreateCloudAccount is the POST /cloud-accounts body; provider defaults to AWS.
type CreateCloudAccount struct {
	AccessKeyID     *string `json:"accessKeyId,omitempty"`
	AccessSecretKey *string `json:"accessSecretKey,omitempty"`
	ConsoleUsername *string `json:"consoleUsername,omitempty"`
	ConsolePassword *string `json:"consolePassword,omitempty"`
	Name            *string `json:"name,omitempty"`
	Provider        *string `json:"provider,omitempty"`
	SignInLoginURL  *string `json:"signInLoginUrl,omitempty"`
}

// UpdateCloudAccount is the PUT /cloud-accounts/{id} body: the create body without
// provider, which cannot change.
type UpdateCloudAccount struct {
	AccessKeyID     *string `json:"accessKeyId,omitempty"`
	AccessSecretKey *string `json:"accessSecretKey,omitempty"`
	ConsoleUsername *string `json:"consoleUsername,omitempty"`
	ConsolePassword *string `json:"consolePassword,omitempty"`
	Name            *string `json:"name,omitempty"`
	SignInLoginURL  *string `json:"signInLoginUrl,omitempty"`
}

// ListCloudAccounts lists the account's cloud accounts, the internal one included.
func (c *Client) ListCloudAccounts(ctx context.Context) (*CloudAccountList, error) {
	var out CloudAccountList
	if err := c.Do(ctx, http.MethodGet, "/cloud-accounts", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetCloudAccount reads one cloud account; IsNotFound(err) when it is gone.
func (c *Client) GetCloudAccount(ctx context.Context, id int) (*CloudAccount, error) {
	var out CloudAccount
	if err := c.Do(ctx, http.MethodGet, pathf("/cloud-accounts/%d", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateCloudAccount submits a cloud account create; the task's resourceId is its id.
func (c *Client) CreateCloudAccount(ctx context.Context, req CreateCloudAccount) (*Task, error) {
	return c.task(ctx, http.MethodPost, "/cloud-accounts", req)
}

// UpdateCloudAccount submits a cloud account update.
func (c *Client) UpdateCloudAccount(ctx context.Context, id int, req UpdateCloudAccount) (*Task, error) {
	return c.task(ctx, http.MethodPut, pathf("/cloud-accounts/%d", id), req)
}

// DeleteCloudAccount submits a cloud account delete.
func (c *Client) DeleteCloudAccount(ctx context.Context, id int) (*Task, error) {
	return c.task(ctx, http.MethodDelete, pathf("/cloud-accounts/%d", id), nil)
}
