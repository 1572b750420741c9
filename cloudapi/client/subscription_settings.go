package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// UpdateMaintenanceWindows is the PUT /subscriptions/{id}/maintenance-windows body. As in
// the official client, empty fields are left out, so the automatic body is exactly
// {"mode":"automatic"}.
type UpdateMaintenanceWindows struct {
	Mode    *string                   `json:"mode,omitempty"`
	Windows []UpdateMaintenanceWindow `json:"windows,omitempty"`
}

// UpdateMaintenanceWindow is one window of the update body.
type UpdateMaintenanceWindow struct {
	StartHour       *int     `json:"startHour,omitempty"`
	DurationInHours *int     `json:"durationInHours,omitempty"`
	Days            []string `json:"days,omitempty"`
}

// UpdateCIDRAllowlist is the PUT /subscriptions/{id}/cidr body; both lists are left out
// when empty, and what is left out is removed (the body is the whole list).
type UpdateCIDRAllowlist struct {
	CIDRIPs          []string `json:"cidrIps,omitempty"`
	SecurityGroupIDs []string `json:"securityGroupIds,omitempty"`
}

// CIDRAllowlist is the response.resource of the GET /subscriptions/{id}/cidr task, in
// the snake_case the API uses there.
type CIDRAllowlist struct {
	CIDRIPs          []string `json:"cidr_ips"`
	SecurityGroupIDs []string `json:"security_group_ids"`
	// Errors is null on success; Terraform fails its read on anything but null, [] or {}.
	Errors json.RawMessage `json:"errors"`
}

// UpdateMaintenanceWindows submits a subscription's maintenance windows.
func (c *Client) UpdateMaintenanceWindows(ctx context.Context, id int, req UpdateMaintenanceWindows) (*Task, error) {
	return c.task(ctx, http.MethodPut, pathf("/subscriptions/%d/maintenance-windows", id), req)
}

// UpdateResourceTags submits the tags of a subscription's cloud resources, replacing
// them all. The key is always sent, as by the official client: nil goes as null, and
// null and [] both clear the tags.
func (c *Client) UpdateResourceTags(ctx context.Context, id int, tags []Tag) (*Task, error) {
	body := struct {
		ResourceTags []Tag `json:"resourceTags"`
	}{tags}
	return c.task(ctx, http.MethodPut, pathf("/subscriptions/%d/resource-tags", id), body)
}

// UpdateCIDRAllowlist submits a subscription's CIDR allow list.
func (c *Client) UpdateCIDRAllowlist(ctx context.Context, id int, req UpdateCIDRAllowlist) (*Task, error) {
	return c.task(ctx, http.MethodPut, pathf("/subscriptions/%d/cidr", id), req)
}

// GetCIDRAllowlist reads a subscription's CIDR allow list: the GET answers a task, which
// it follows to its end and whose response.resource it decodes. A failed task is returned
// as its *Error.
func (c *Client) GetCIDRAllowlist(ctx context.Context, id int) (*CIDRAllowlist, error) {
	t, err := c.Wait(ctx)(c.task(ctx, http.MethodGet, pathf("/subscriptions/%d/cidr", id), nil))
	if err != nil {
		return nil, err
	}
	if t.Response == nil || len(t.Response.Resource) == 0 {
		// The official client would dereference the missing resource and panic.
		return nil, fmt.Errorf("GET /subscriptions/%d/cidr: task %s completed without a response.resource", id, t.ID)
	}
	var out CIDRAllowlist
	if err := json.Unmarshal(t.Response.Resource, &out); err != nil {
		return nil, fmt.Errorf("GET /subscriptions/%d/cidr: decode task %s resource: %w", id, t.ID, err)
	}
	return &out, nil
}
