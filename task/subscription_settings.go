package task

import (
	"context"

	"clouddb"
)

// The subscription settings that change no server: maintenance windows and the CIDR allow
// list. A change is written at once and leaves the subscription's status and generation
// as they are, so there is nothing to provision and the calls Terraform makes next (a
// subscription update right after PUT …/cidr) find the subscription still active.
// Resource tags are a subscription update (updateSubscription), as on the real API.

func updateMaintenanceWindows(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var u clouddb.MaintenanceWindowsUpdate
	if err := decode(t, &u); err != nil {
		return 0, err
	}
	sub, err := findSubscription(ctx, tx, t.AccountID, t.SubscriptionID)
	if err != nil {
		return 0, err
	}
	mw, err := u.Validate(sub.MemoryStorage)
	if err != nil {
		return 0, err
	}
	sub.MaintenanceWindows = mw
	if err := tx.UpdateSubscription(ctx, sub); err != nil {
		return 0, err
	}
	return sub.ID, v.log(ctx, clouddb.LogTypeSubscription, sub.Name, sub.ID, "Maintenance windows of subscription %q (id %d) set: %s mode, %d window(s)",
		sub.Name, sub.ID, mw.Mode, len(mw.Windows))
}

func updateCIDRAllowlist(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var l clouddb.CIDRAllowlist
	if err := decode(t, &l); err != nil {
		return 0, err
	}
	sub, err := findSubscription(ctx, tx, t.AccountID, t.SubscriptionID)
	if err != nil {
		return 0, err
	}
	if err := l.Validate(sub); err != nil {
		return 0, err
	}
	// The body is the whole list: what it leaves out is removed.
	sub.CIDRAllowlist = clouddb.CIDRAllowlist{CIDRIPs: nilIfEmpty(l.CIDRIPs), SecurityGroupIDs: nilIfEmpty(l.SecurityGroupIDs)}
	if err := tx.UpdateSubscription(ctx, sub); err != nil {
		return 0, err
	}
	return sub.ID, v.log(ctx, clouddb.LogTypeSubscription, sub.Name, sub.ID, "CIDR allow list of subscription %q (id %d) set: %d CIDR(s), %d security group(s)",
		sub.Name, sub.ID, len(l.CIDRIPs), len(l.SecurityGroupIDs))
}

// cidrAllowlistView is the resource of a GET …/cidr task, in the snake_case the real API
// uses there. Errors is always null: Terraform fails its read on anything else.
type cidrAllowlistView struct {
	CIDRIPs          []string `json:"cidr_ips"`
	SecurityGroupIDs []string `json:"security_group_ids"`
	Errors           any      `json:"errors"`
}

func getCIDRAllowlist(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	sub, err := findSubscription(ctx, tx, t.AccountID, t.SubscriptionID)
	if err != nil {
		return 0, err
	}
	if err := clouddb.CheckCIDRAllowed(sub); err != nil {
		return 0, err
	}
	l := sub.CIDRAllowlist
	v.resource = cidrAllowlistView{CIDRIPs: emptyIfNil(l.CIDRIPs), SecurityGroupIDs: emptyIfNil(l.SecurityGroupIDs)}
	return sub.ID, nil
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func emptyIfNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
