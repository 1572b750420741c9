package task

import (
	"context"
	"errors"

	"clouddb"
)

// ACL statuses. An entity is pending while a change that alters what the servers must
// hold for it is not yet on every database it reaches; every change that makes an entity
// pending also advances its Generation, so that the reconciler, which reads the entities
// at one generation, applies them and sets active with SetACL*Status(id, generation),
// never settles a change it has not applied. What each command makes pending:
//
//   - rule create, rule update: the rule; an update that changes the rule text also every
//     role using the rule and every user holding one of those roles (their access
//     changes); a rename alone touches only the rule.
//   - role create, role update: the role; an update that changes the role's associations
//     (the set of rule-database pairs) also every user holding the role.
//   - user create, user update: the user.
//   - user delete: the user becomes deleting; the reconciler deletes the row once no
//     server has the user.
//
// Rule and role deletes remove the row at once: a rule used by a role and a role held by
// a user cannot be deleted, so nothing on any server depends on what is deleted. Users
// already being deleted are left deleting by the cascades. A role's status therefore
// moves between pending and active only, the two states Terraform's waiter knows.

// aclRuleRequest is the payload of the rule commands. ID names the rule an update or a
// delete targets, since a task has no column for it.
type aclRuleRequest struct {
	ID        int     `json:"id,omitempty"`
	Name      *string `json:"name,omitempty"`
	RedisRule *string `json:"redisRule,omitempty"`
}

const ruleRes = "ACL redis rule"

func errRuleNotFound(id int) error {
	return clouddb.NotFound(clouddb.ErrTypeACLRuleNotFound, "ACL redis rule %d not found", id)
}

func errRuleNameTaken(name string) error {
	return clouddb.Conflict(clouddb.ErrTypeACLRuleNameTaken, "ACL redis rule: name %q is already used by another rule (default rules included)", name)
}

// findACLRule is a rule the account sees (its own or a default one), with every rule it
// sees.
func findACLRule(ctx context.Context, tx clouddb.Tx, accountID, id int) (*clouddb.ACLRule, []*clouddb.ACLRule, error) {
	rules, err := tx.ACLRules(ctx, accountID)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rules {
		if r.ID == id {
			return r, rules, nil
		}
	}
	return nil, nil, errRuleNotFound(id)
}

// ruleNamed is the rule of rules with the name, other than the rule selfID.
func ruleNamed(rules []*clouddb.ACLRule, name string, selfID int) *clouddb.ACLRule {
	for _, r := range rules {
		if r.Name == name && r.ID != selfID {
			return r
		}
	}
	return nil
}

// rolesUsing are the roles of roles with an association to the rule.
func rolesUsing(roles []*clouddb.ACLRole, ruleID int) []*clouddb.ACLRole {
	var out []*clouddb.ACLRole
	for _, r := range roles {
		for _, rr := range r.Rules {
			if rr.RuleID == ruleID {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

func createACLRule(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var req aclRuleRequest
	if err := decode(t, &req); err != nil {
		return 0, err
	}
	if req.Name == nil || req.RedisRule == nil {
		return 0, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL redis rule: name and redisRule are required")
	}
	if err := clouddb.ValidateACLName(ruleRes, *req.Name); err != nil {
		return 0, err
	}
	// Only the syntax is checked here: a rule is verified on a real server when a role
	// first assigns it, as the API documents.
	if err := clouddb.ValidateACLRule(*req.RedisRule); err != nil {
		return 0, err
	}
	rules, err := tx.ACLRules(ctx, t.AccountID)
	if err != nil {
		return 0, err
	}
	if ruleNamed(rules, *req.Name, 0) != nil {
		return 0, errRuleNameTaken(*req.Name)
	}
	r := &clouddb.ACLRule{AccountID: t.AccountID, Name: *req.Name, ACL: *req.RedisRule, Status: clouddb.ACLPending, Generation: 1}
	if err := tx.CreateACLRule(ctx, r); errors.Is(err, clouddb.ErrConflict) {
		return 0, errRuleNameTaken(r.Name)
	} else if err != nil {
		return 0, err
	}
	return r.ID, v.log(ctx, clouddb.LogTypeACLRule, r.Name, r.ID, "ACL redis rule %q (id %d) created", r.Name, r.ID)
}

// ruleUpdate is a rule update checked against the store: the rule as it will be, and the
// roles whose users' access changes with it.
type ruleUpdate struct {
	rule         *clouddb.ACLRule
	textChanged  bool
	affectedRole []*clouddb.ACLRole
}

// planRuleUpdate checks an update and computes its effect without writing anything.
func planRuleUpdate(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) (*ruleUpdate, error) {
	var req aclRuleRequest
	if err := decode(t, &req); err != nil {
		return nil, err
	}
	r, rules, err := findACLRule(ctx, tx, t.AccountID, req.ID)
	if err != nil {
		return nil, err
	}
	if r.IsDefault {
		return nil, clouddb.Forbidden(clouddb.ErrTypeACLRuleDefaultUpdate, "ACL redis rule %q is a default rule and cannot be updated", r.Name)
	}
	u := &ruleUpdate{rule: r}
	// The same name sent again is no rename (the provider resent it before v1.8.0).
	if req.Name != nil && *req.Name != r.Name {
		if err := clouddb.ValidateACLName(ruleRes, *req.Name); err != nil {
			return nil, err
		}
		if ruleNamed(rules, *req.Name, r.ID) != nil {
			return nil, errRuleNameTaken(*req.Name)
		}
		r.Name = *req.Name
	}
	if req.RedisRule != nil {
		if err := clouddb.ValidateACLRule(*req.RedisRule); err != nil {
			return nil, err
		}
		u.textChanged = *req.RedisRule != r.ACL
		r.ACL = *req.RedisRule
	}
	if u.textChanged {
		roles, err := tx.ACLRoles(ctx, t.AccountID)
		if err != nil {
			return nil, err
		}
		u.affectedRole = rolesUsing(roles, r.ID)
	}
	return u, nil
}

// updateACLRule is a job: a new text of a rule that roles use is verified on a real
// server before it is stored (see checkedJob).
func updateACLRule(ctx context.Context, e *Engine, t *clouddb.Task) (*outcome, error) {
	return checkedJob(ctx, e, t,
		func(ctx context.Context, tx clouddb.Tx) ([]*clouddb.ACLRule, error) {
			u, err := planRuleUpdate(ctx, tx, t)
			if err != nil || len(u.affectedRole) == 0 {
				return nil, err
			}
			return []*clouddb.ACLRule{u.rule}, nil
		},
		func(ctx context.Context, v *env, tx clouddb.Tx) (int, error) {
			u, err := planRuleUpdate(ctx, tx, t)
			if err != nil {
				return 0, err
			}
			r := u.rule
			r.Status = clouddb.ACLPending
			r.Generation++
			if err := tx.UpdateACLRule(ctx, r); errors.Is(err, clouddb.ErrConflict) {
				return 0, errRuleNameTaken(r.Name)
			} else if err != nil {
				return 0, err
			}
			for _, role := range u.affectedRole {
				if err := markRolePending(ctx, tx, role, true); err != nil {
					return 0, err
				}
			}
			return r.ID, v.log(ctx, clouddb.LogTypeACLRule, r.Name, r.ID, "ACL redis rule %q (id %d) updated", r.Name, r.ID)
		})
}

func deleteACLRule(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var req aclRuleRequest
	if err := decode(t, &req); err != nil {
		return 0, err
	}
	r, _, err := findACLRule(ctx, tx, t.AccountID, req.ID)
	if err != nil {
		return 0, err
	}
	if r.IsDefault {
		return 0, clouddb.Forbidden(clouddb.ErrTypeACLRuleDefaultDelete, "ACL redis rule %q is a default rule and cannot be deleted", r.Name)
	}
	roles, err := tx.ACLRoles(ctx, t.AccountID)
	if err != nil {
		return 0, err
	}
	if using := rolesUsing(roles, r.ID); len(using) > 0 {
		return 0, clouddb.Conflict(clouddb.ErrTypeACLRuleInUse, "ACL redis rule %q is used by role %q (and %d other roles); remove it from them first",
			r.Name, using[0].Name, len(using)-1)
	}
	// No role uses the rule, so no server holds it: the row goes at once.
	if err := tx.DeleteACLRule(ctx, r.ID); err != nil {
		return 0, err
	}
	return r.ID, v.log(ctx, clouddb.LogTypeACLRule, r.Name, r.ID, "ACL redis rule %q (id %d) deleted", r.Name, r.ID)
}

// checkedJob runs an ACL command whose rules may need verifying on a real server. plan
// checks the command in a read-only transaction and names the rules to verify; they are
// verified outside any transaction, because the driver's checker may start a server
// process, and the SQLite store has a single writer that every task, request and
// reconciler step would wait for meanwhile. apply then checks the command again and
// writes it in the transaction that ends the task. The account's tasks run one at a time,
// so the rules apply finds are those plan named.
func checkedJob(ctx context.Context, e *Engine, t *clouddb.Task,
	plan func(context.Context, clouddb.Tx) ([]*clouddb.ACLRule, error),
	apply func(context.Context, *env, clouddb.Tx) (int, error)) (*outcome, error) {
	var rules []*clouddb.ACLRule
	err := e.Store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		rules, err = plan(ctx, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := e.checkRules(ctx, rules); err != nil {
		return nil, err
	}
	out := &outcome{}
	out.record = func(ctx context.Context, tx clouddb.Tx) error {
		id, err := apply(ctx, &env{Engine: e, tx: tx, task: t}, tx)
		out.resourceID = id
		return err
	}
	return out, nil
}

// checkRules verifies rules on real servers when the driver can (clouddb.ACLChecker), in
// one batch: the checker starts one server per Redis version for all of them, not one
// per rule. Default rules are clouddb's own and need no check. The checker refuses a rule
// with an ACL_REDIS_RULE_PATTERN_NOT_VALID error that names it by its text (it knows no
// names) and the word the server refused: the task's error names it by its name instead,
// with the server's reason once. Any other error means the check could not be made,
// which fails the task as an internal error rather than blaming the rule.
func (e *Engine) checkRules(ctx context.Context, rules []*clouddb.ACLRule) error {
	checker, ok := e.Driver.(clouddb.ACLChecker)
	if !ok {
		return nil
	}
	var texts []string
	names := map[string]string{} // by text, the first rule with it
	for _, r := range rules {
		if _, seen := names[r.ACL]; r.IsDefault || seen {
			continue
		}
		names[r.ACL] = r.Name
		texts = append(texts, r.ACL)
	}
	if len(texts) == 0 {
		return nil
	}
	err := checker.CheckACLRules(ctx, texts)
	if text, reason, refused := clouddb.ACLRuleRefusal(err); refused {
		if name, ok := names[text]; ok {
			return clouddb.ACLRuleRefused(name, reason)
		}
	}
	return err
}
