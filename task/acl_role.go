package task

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"clouddb"
)

// aclRoleRequest is the payload of the role commands; ID names the role an update or a
// delete targets.
type aclRoleRequest struct {
	ID         int                   `json:"id,omitempty"`
	Name       *string               `json:"name,omitempty"`
	RedisRules *[]aclRoleRuleRequest `json:"redisRules,omitempty"`
}

// aclRoleRuleRequest is one association of a role as sent: a rule by name and the
// databases it applies to.
type aclRoleRuleRequest struct {
	RuleName  string                       `json:"ruleName"`
	Databases []clouddb.ACLRoleDatabaseRef `json:"databases"`
}

const roleRes = "ACL role"

func errRoleNotFound(id int) error {
	return clouddb.NotFound(clouddb.ErrTypeACLRoleNotFound, "ACL role %d not found", id)
}

func errRoleNameTaken(name string) error {
	return clouddb.Conflict(clouddb.ErrTypeACLRoleNameTaken, "ACL role: name %q is already used by another role", name)
}

// roleNamed is the role of roles with the name, other than the role selfID.
func roleNamed(roles []*clouddb.ACLRole, name string, selfID int) *clouddb.ACLRole {
	for _, r := range roles {
		if r.Name == name && r.ID != selfID {
			return r
		}
	}
	return nil
}

// resolveAssociations turns the associations of a request into a role's rules: each rule
// named must be one the account sees, each database a live one of the account, and each
// database may have one rule in the role. It also returns the rules used.
func resolveAssociations(ctx context.Context, tx clouddb.Tx, accountID int, reqs []aclRoleRuleRequest) ([]clouddb.ACLRoleRule, []*clouddb.ACLRule, error) {
	if len(reqs) == 0 {
		return nil, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: redisRules must hold at least one rule")
	}
	if len(reqs) > clouddb.MaxListLength {
		return nil, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: redisRules may hold at most %d rules", clouddb.MaxListLength)
	}
	rules, err := tx.ACLRules(ctx, accountID)
	if err != nil {
		return nil, nil, err
	}
	type place struct{ sub, db int }
	ruleOf := map[place]int{} // the association that gave each database its rule
	var (
		out  []clouddb.ACLRoleRule
		used []*clouddb.ACLRule
	)
	for i, a := range reqs {
		rule := ruleNamed(rules, a.RuleName, 0)
		if rule == nil {
			return nil, nil, clouddb.NotFound(clouddb.ErrTypeACLRuleNotFound, "ACL redis rule %q (redisRules[%d].ruleName) not found", a.RuleName, i)
		}
		if len(a.Databases) == 0 {
			return nil, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: redisRules[%d].databases must name at least one database", i)
		}
		if len(a.Databases) > clouddb.MaxListLength {
			return nil, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: redisRules[%d].databases may name at most %d databases", i, clouddb.MaxListLength)
		}
		rr := clouddb.ACLRoleRule{RuleID: rule.ID}
		for j, d := range a.Databases {
			field := fmt.Sprintf("redisRules[%d].databases[%d]", i, j)
			if len(d.Regions) > 0 {
				// Regions choose a rule per region of an Active-Active database, and
				// clouddb has none: every database is single-region.
				return nil, nil, clouddb.Invalid(clouddb.ErrTypeACLRoleRegionsNotCRDB,
					"ACL role: %s.regions applies only to Active-Active databases, which clouddb does not offer; leave regions out", field)
			}
			if err := liveDatabase(ctx, tx, accountID, d.SubscriptionID, d.DatabaseID, field); err != nil {
				return nil, nil, err
			}
			p := place{d.SubscriptionID, d.DatabaseID}
			if k, ok := ruleOf[p]; ok {
				return nil, nil, clouddb.Invalid(clouddb.ErrTypeACLRoleRuleTwicePerDatabase,
					"ACL role: database %d of subscription %d has a rule in redisRules[%d] and in redisRules[%d]; a role gives each database one rule",
					d.DatabaseID, d.SubscriptionID, k, i)
			}
			ruleOf[p] = i
			rr.Databases = append(rr.Databases, clouddb.ACLRoleDatabaseRef{SubscriptionID: d.SubscriptionID, DatabaseID: d.DatabaseID})
		}
		out = append(out, rr)
		used = append(used, rule)
	}
	return out, used, nil
}

// liveDatabase checks that a database a role names exists in the account's subscription
// and is not being deleted.
func liveDatabase(ctx context.Context, tx clouddb.Tx, accountID, subID, dbID int, field string) error {
	sub, err := tx.Subscription(ctx, accountID, subID)
	if errors.Is(err, clouddb.ErrNotFound) || (err == nil && sub.Status == clouddb.SubscriptionDeleting) {
		return clouddb.NotFound(clouddb.ErrTypeSubscriptionNotFound, "Subscription was not found: %s.subscriptionId %d", field, subID)
	} else if err != nil {
		return err
	}
	d, err := tx.Database(ctx, accountID, dbID)
	if errors.Is(err, clouddb.ErrNotFound) || (err == nil && (d.SubscriptionID != subID || d.Status == clouddb.DatabaseDeleting)) {
		return clouddb.NotFound(clouddb.ErrTypeDatabaseNotFound, "Database was not found: %s.databaseId %d in subscription %d", field, dbID, subID)
	}
	return err
}

// associationSet is a role's rules as a set of rule-database pairs.
func associationSet(rules []clouddb.ACLRoleRule) map[[3]int]bool {
	set := map[[3]int]bool{}
	for _, rr := range rules {
		for _, d := range rr.Databases {
			set[[3]int{rr.RuleID, d.SubscriptionID, d.DatabaseID}] = true
		}
	}
	return set
}

// sameAssociations reports whether two roles' rules give the same rules to the same
// databases, whatever their order.
func sameAssociations(a, b []clouddb.ACLRoleRule) bool {
	sa, sb := associationSet(a), associationSet(b)
	if len(sa) != len(sb) {
		return false
	}
	for k := range sa {
		if !sb[k] {
			return false
		}
	}
	return true
}

// usersHolding are the users of the account that hold the role, deleting ones included.
func usersHolding(ctx context.Context, tx clouddb.Tx, accountID, roleID int) ([]*clouddb.ACLUser, error) {
	users, err := tx.ACLUsers(ctx, accountID)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(users, func(u *clouddb.ACLUser) bool { return u.RoleID != roleID }), nil
}

// markRolePending stores role as pending at its next generation; with users, the users
// holding it (except those being deleted) go pending too, their access having changed.
func markRolePending(ctx context.Context, tx clouddb.Tx, role *clouddb.ACLRole, users bool) error {
	role.Status = clouddb.ACLPending
	role.Generation++
	if err := tx.UpdateACLRole(ctx, role); errors.Is(err, clouddb.ErrConflict) {
		return errRoleNameTaken(role.Name)
	} else if err != nil {
		return err
	}
	if !users {
		return nil
	}
	holders, err := usersHolding(ctx, tx, role.AccountID, role.ID)
	if err != nil {
		return err
	}
	for _, u := range holders {
		if u.Status == clouddb.ACLDeleting {
			continue
		}
		u.Status = clouddb.ACLPending
		u.Generation++
		if err := tx.UpdateACLUser(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// planRoleCreate checks a role create and returns the role to store and the rules it uses.
func planRoleCreate(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) (*clouddb.ACLRole, []*clouddb.ACLRule, error) {
	var req aclRoleRequest
	if err := decode(t, &req); err != nil {
		return nil, nil, err
	}
	if req.Name == nil || req.RedisRules == nil {
		return nil, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: name and redisRules are required")
	}
	if err := clouddb.ValidateACLName(roleRes, *req.Name); err != nil {
		return nil, nil, err
	}
	roles, err := tx.ACLRoles(ctx, t.AccountID)
	if err != nil {
		return nil, nil, err
	}
	if roleNamed(roles, *req.Name, 0) != nil {
		return nil, nil, errRoleNameTaken(*req.Name)
	}
	assoc, used, err := resolveAssociations(ctx, tx, t.AccountID, *req.RedisRules)
	if err != nil {
		return nil, nil, err
	}
	role := &clouddb.ACLRole{AccountID: t.AccountID, Name: *req.Name, Rules: assoc, Status: clouddb.ACLPending, Generation: 1}
	return role, used, nil
}

// createACLRole is a job: the rules a role assigns are verified on a real server first.
func createACLRole(ctx context.Context, e *Engine, t *clouddb.Task) (*outcome, error) {
	return checkedJob(ctx, e, t,
		func(ctx context.Context, tx clouddb.Tx) ([]*clouddb.ACLRule, error) {
			_, used, err := planRoleCreate(ctx, tx, t)
			return used, err
		},
		func(ctx context.Context, v *env, tx clouddb.Tx) (int, error) {
			role, _, err := planRoleCreate(ctx, tx, t)
			if err != nil {
				return 0, err
			}
			if err := tx.CreateACLRole(ctx, role); errors.Is(err, clouddb.ErrConflict) {
				return 0, errRoleNameTaken(role.Name)
			} else if err != nil {
				return 0, err
			}
			return role.ID, v.log(ctx, clouddb.LogTypeACLRole, role.Name, role.ID, "ACL role %q (id %d) created", role.Name, role.ID)
		})
}

// findACLRole is a role of the account.
func findACLRole(ctx context.Context, tx clouddb.Tx, accountID, id int) (*clouddb.ACLRole, error) {
	role, err := tx.ACLRole(ctx, accountID, id)
	if errors.Is(err, clouddb.ErrNotFound) {
		return nil, errRoleNotFound(id)
	}
	return role, err
}

// roleUpdate is a role update checked against the store.
type roleUpdate struct {
	role *clouddb.ACLRole
	// used are the rules of the new associations (none when they are not sent).
	used []*clouddb.ACLRule
	// accessChanged is set when the associations differ from the stored ones.
	accessChanged bool
}

func planRoleUpdate(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) (*roleUpdate, error) {
	var req aclRoleRequest
	if err := decode(t, &req); err != nil {
		return nil, err
	}
	role, err := findACLRole(ctx, tx, t.AccountID, req.ID)
	if err != nil {
		return nil, err
	}
	u := &roleUpdate{role: role}
	if req.Name != nil && *req.Name != role.Name {
		if err := clouddb.ValidateACLName(roleRes, *req.Name); err != nil {
			return nil, err
		}
		roles, err := tx.ACLRoles(ctx, t.AccountID)
		if err != nil {
			return nil, err
		}
		if roleNamed(roles, *req.Name, role.ID) != nil {
			return nil, errRoleNameTaken(*req.Name)
		}
		role.Name = *req.Name
	}
	if req.RedisRules != nil {
		assoc, used, err := resolveAssociations(ctx, tx, t.AccountID, *req.RedisRules)
		if err != nil {
			return nil, err
		}
		u.accessChanged = !sameAssociations(role.Rules, assoc)
		u.used = used
		role.Rules = assoc
	}
	return u, nil
}

// updateACLRole is a job, like createACLRole.
func updateACLRole(ctx context.Context, e *Engine, t *clouddb.Task) (*outcome, error) {
	return checkedJob(ctx, e, t,
		func(ctx context.Context, tx clouddb.Tx) ([]*clouddb.ACLRule, error) {
			u, err := planRoleUpdate(ctx, tx, t)
			if err != nil {
				return nil, err
			}
			return u.used, nil
		},
		func(ctx context.Context, v *env, tx clouddb.Tx) (int, error) {
			u, err := planRoleUpdate(ctx, tx, t)
			if err != nil {
				return 0, err
			}
			if err := markRolePending(ctx, tx, u.role, u.accessChanged); err != nil {
				return 0, err
			}
			return u.role.ID, v.log(ctx, clouddb.LogTypeACLRole, u.role.Name, u.role.ID, "ACL role %q (id %d) updated", u.role.Name, u.role.ID)
		})
}

func deleteACLRole(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var req aclRoleRequest
	if err := decode(t, &req); err != nil {
		return 0, err
	}
	role, err := findACLRole(ctx, tx, t.AccountID, req.ID)
	if err != nil {
		return 0, err
	}
	// A user being deleted still counts: until the reconciler has removed it from the
	// servers, its row names the role.
	holders, err := usersHolding(ctx, tx, t.AccountID, role.ID)
	if err != nil {
		return 0, err
	}
	if len(holders) > 0 {
		return 0, clouddb.Conflict(clouddb.ErrTypeACLRoleHasUsers, "ACL role %q is held by user %q (and %d other users); delete them or give them another role first",
			role.Name, holders[0].Name, len(holders)-1)
	}
	// No user holds the role, so no server has anything of it: the row goes at once.
	if err := tx.DeleteACLRole(ctx, role.ID); err != nil {
		return 0, err
	}
	return role.ID, v.log(ctx, clouddb.LogTypeACLRole, role.Name, role.ID, "ACL role %q (id %d) deleted", role.Name, role.ID)
}
