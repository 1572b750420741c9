package client

import (
	"context"
	"fmt"
	"net/http"
)

// ACL statuses, the same for rules, roles and users. Terraform's waiters know pending and
// active only.
const (
	ACLPending  = "pending"
	ACLActive   = "active"
	ACLError    = "error"
	ACLDeleting = "deleting"
)

// RedisRule is an element of GET /acl/redisRules. The rule text is sent as redisRule and
// read back as acl. ID is not omitted when zero: the official client dereferences it.
type RedisRule struct {
	ID        int    `json:"id"`
	Name      string `json:"name,omitempty"`
	ACL       string `json:"acl,omitempty"`
	IsDefault bool   `json:"isDefault"`
	Status    string `json:"status,omitempty"`
}

// RedisRuleList is GET /acl/redisRules.
type RedisRuleList struct {
	AccountID  int         `json:"accountId"`
	RedisRules []RedisRule `json:"redisRules"`
}

// CreateRedisRule is the body of POST /acl/redisRules and PUT /acl/redisRules/{id}; on an
// update, unset fields mean "no change".
type CreateRedisRule struct {
	Name      *string `json:"name,omitempty"`
	RedisRule *string `json:"redisRule,omitempty"`
}

// Role is an element of GET /acl/roles.
type Role struct {
	ID         int        `json:"id"`
	Name       string     `json:"name,omitempty"`
	RedisRules []RoleRule `json:"redisRules"`
	Users      []RoleUser `json:"users"`
	Status     string     `json:"status,omitempty"`
}

// RoleRule is one rule of a role and the databases it applies to. RuleID is read only.
type RoleRule struct {
	RuleID    int            `json:"ruleId,omitempty"`
	RuleName  string         `json:"ruleName"`
	Databases []RoleDatabase `json:"databases"`
}

// RoleDatabase is a database a role's rule applies to. DatabaseName is read only; Regions
// is left out of requests when empty, as Terraform does.
type RoleDatabase struct {
	SubscriptionID int      `json:"subscriptionId"`
	DatabaseID     int      `json:"databaseId"`
	DatabaseName   string   `json:"databaseName,omitempty"`
	Regions        []string `json:"regions,omitempty"`
}

// RoleUser is a user holding a role.
type RoleUser struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// RoleList is GET /acl/roles.
type RoleList struct {
	AccountID int    `json:"accountId"`
	Roles     []Role `json:"roles"`
}

// CreateRole is the body of POST /acl/roles and PUT /acl/roles/{id}; on an update, unset
// fields mean "no change".
type CreateRole struct {
	Name       *string    `json:"name,omitempty"`
	RedisRules []RoleRule `json:"redisRules,omitempty"`
}

// User is GET /acl/users/{id} and an element of GET /acl/users. Role is the role's name;
// the password is never returned.
type User struct {
	ID     int    `json:"id"`
	Name   string `json:"name,omitempty"`
	Role   string `json:"role,omitempty"`
	Status string `json:"status,omitempty"`
}

// UserList is GET /acl/users.
type UserList struct {
	AccountID int    `json:"accountId"`
	Users     []User `json:"users"`
}

// CreateUser is the POST /acl/users body.
type CreateUser struct {
	Name     *string `json:"name,omitempty"`
	Role     *string `json:"role,omitempty"`
	Password *string `json:"password,omitempty"`
}

// UpdateUser is the PUT /acl/users/{id} body: a user's name cannot change.
type UpdateUser struct {
	Role     *string `json:"role,omitempty"`
	Password *string `json:"password,omitempty"`
}

// ListRedisRules lists the account's rules, the default ones included.
func (c *Client) ListRedisRules(ctx context.Context) (*RedisRuleList, error) {
	var out RedisRuleList
	if err := c.Do(ctx, http.MethodGet, "/acl/redisRules", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// notFound is the error of an id missing from a list, as the official client reports it.
func notFound(what string, id int) *Error {
	return &Error{StatusCode: http.StatusNotFound, Type: "NOT_FOUND", Description: fmt.Sprintf("%s %d not found", what, id)}
}

// GetRedisRule finds a rule in the list, as the official client does (the API has no
// GET by id for rules); IsNotFound(err) when it is not there.
func (c *Client) GetRedisRule(ctx context.Context, id int) (*RedisRule, error) {
	list, err := c.ListRedisRules(ctx)
	if err != nil {
		return nil, err
	}
	for i := range list.RedisRules {
		if list.RedisRules[i].ID == id {
			return &list.RedisRules[i], nil
		}
	}
	return nil, notFound("ACL redis rule", id)
}

// CreateRedisRule submits a rule create; the task's resourceId is its id.
func (c *Client) CreateRedisRule(ctx context.Context, req CreateRedisRule) (*Task, error) {
	return c.task(ctx, http.MethodPost, "/acl/redisRules", req)
}

// UpdateRedisRule submits a rule update.
func (c *Client) UpdateRedisRule(ctx context.Context, id int, req CreateRedisRule) (*Task, error) {
	return c.task(ctx, http.MethodPut, pathf("/acl/redisRules/%d", id), req)
}

// DeleteRedisRule submits a rule delete.
func (c *Client) DeleteRedisRule(ctx context.Context, id int) (*Task, error) {
	return c.task(ctx, http.MethodDelete, pathf("/acl/redisRules/%d", id), nil)
}

// ListRoles lists the account's roles.
func (c *Client) ListRoles(ctx context.Context) (*RoleList, error) {
	var out RoleList
	if err := c.Do(ctx, http.MethodGet, "/acl/roles", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetRole finds a role in the list, as the official client does; IsNotFound(err) when it
// is not there.
func (c *Client) GetRole(ctx context.Context, id int) (*Role, error) {
	list, err := c.ListRoles(ctx)
	if err != nil {
		return nil, err
	}
	for i := range list.Roles {
		if list.Roles[i].ID == id {
			return &list.Roles[i], nil
		}
	}
	return nil, notFound("ACL role", id)
}

// CreateRole submits a role create; the task's resourceId is its id.
func (c *Client) CreateRole(ctx context.Context, req CreateRole) (*Task, error) {
	return c.task(ctx, http.MethodPost, "/acl/roles", req)
}

// UpdateRole submits a role update.
func (c *Client) UpdateRole(ctx context.Context, id int, req CreateRole) (*Task, error) {
	return c.task(ctx, http.MethodPut, pathf("/acl/roles/%d", id), req)
}

// DeleteRole submits a role delete.
func (c *Client) DeleteRole(ctx context.Context, id int) (*Task, error) {
	return c.task(ctx, http.MethodDelete, pathf("/acl/roles/%d", id), nil)
}

// ListUsers lists the account's ACL users.
func (c *Client) ListUsers(ctx context.Context) (*UserList, error) {
	var out UserList
	if err := c.Do(ctx, http.MethodGet, "/acl/users", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetUser reads one ACL user; IsNotFound(err) when it is gone.
func (c *Client) GetUser(ctx context.Context, id int) (*User, error) {
	var out User
	if err := c.Do(ctx, http.MethodGet, pathf("/acl/users/%d", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateUser submits a user create; the task's resourceId is its id.
func (c *Client) CreateUser(ctx context.Context, req CreateUser) (*Task, error) {
	return c.task(ctx, http.MethodPost, "/acl/users", req)
}

// UpdateUser submits a user update.
func (c *Client) UpdateUser(ctx context.Context, id int, req UpdateUser) (*Task, error) {
	return c.task(ctx, http.MethodPut, pathf("/acl/users/%d", id), req)
}

// DeleteUser submits a user delete.
func (c *Client) DeleteUser(ctx context.Context, id int) (*Task, error) {
	return c.task(ctx, http.MethodDelete, pathf("/acl/users/%d", id), nil)
}

// waitACL polls get until the entity has the status, as Terraform's waiters do: an
// error, a status other than pending and the target (error, deleting, none), or the
// end of ctx fails.
func waitACL[T any](ctx context.Context, c *Client, what string, id int, status string, get func() (*T, string, error)) (*T, error) {
	for {
		v, got, err := get()
		if err != nil {
			return nil, err
		}
		if got == status {
			return v, nil
		}
		if got != ACLPending {
			return v, fmt.Errorf("%s %d is %q while waiting for %s", what, id, got, status)
		}
		if err := c.sleep(ctx); err != nil {
			return v, fmt.Errorf("waiting for %s %d to be %s (it is %s): %w", what, id, status, got, err)
		}
	}
}

// WaitForRedisRuleStatus polls the rule list until the rule has the status.
func (c *Client) WaitForRedisRuleStatus(ctx context.Context, id int, status string) (*RedisRule, error) {
	return waitACL(ctx, c, "ACL redis rule", id, status, func() (*RedisRule, string, error) {
		r, err := c.GetRedisRule(ctx, id)
		if err != nil {
			return nil, "", err
		}
		return r, r.Status, nil
	})
}

// WaitForRoleStatus polls the role list until the role has the status.
func (c *Client) WaitForRoleStatus(ctx context.Context, id int, status string) (*Role, error) {
	return waitACL(ctx, c, "ACL role", id, status, func() (*Role, string, error) {
		r, err := c.GetRole(ctx, id)
		if err != nil {
			return nil, "", err
		}
		return r, r.Status, nil
	})
}

// WaitForUserStatus polls a user until it has the status.
func (c *Client) WaitForUserStatus(ctx context.Context, id int, status string) (*User, error) {
	return waitACL(ctx, c, "ACL user", id, status, func() (*User, string, error) {
		u, err := c.GetUser(ctx, id)
		if err != nil {
			return nil, "", err
		}
		return u, u.Status, nil
	})
}

// WaitForUserGone polls a deleted user until GET answers 404, which is how Terraform
// learns that the delete is done.
func (c *Client) WaitForUserGone(ctx context.Context, id int) error {
	for {
		u, err := c.GetUser(ctx, id)
		if IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := c.sleep(ctx); err != nil {
			return fmt.Errorf("waiting for ACL user %d to be gone (it is %s): %w", id, u.Status, err)
		}
	}
}
