package cloudapi

import (
	"fmt"
	"net/http"

	"clouddb"
)

func (s *Server) registerACLRoleRoutes() {
	s.route("GET /acl/roles", s.listACLRoles)
	s.route("POST /acl/roles", s.createACLRole)
	s.route("PUT /acl/roles/{roleId}", s.updateACLRole)
	s.route("DELETE /acl/roles/{roleId}", s.deleteACLRole)
}

// aclRoleRequest is the body of a role create or update. Its fields are pointers so that
// an absent required field can be told from an empty one.
type aclRoleRequest struct {
	Name       *string               `json:"name,omitempty"`
	RedisRules *[]aclRoleRuleRequest `json:"redisRules,omitempty"`
}

// aclRoleRuleRequest is one association: a rule, by name, and the databases it applies to.
type aclRoleRuleRequest struct {
	RuleName  *string                   `json:"ruleName,omitempty"`
	Databases *[]aclRoleDatabaseRequest `json:"databases,omitempty"`
}

type aclRoleDatabaseRequest struct {
	SubscriptionID *int `json:"subscriptionId,omitempty"`
	DatabaseID     *int `json:"databaseId,omitempty"`
	// Regions are refused by the task: clouddb has no Active-Active database.
	Regions []string `json:"regions,omitempty"`
}

// aclRoleTask is the payload of the role commands.
type aclRoleTask struct {
	aclTarget
	aclRoleRequest
}

// checkRoleRules refuses associations with a required field missing.
func checkRoleRules(rules []aclRoleRuleRequest) error {
	if len(rules) == 0 {
		return clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: field redisRules must hold at least one rule")
	}
	for i, a := range rules {
		if err := required("ACL role", fmt.Sprintf("redisRules[%d].ruleName", i), a.RuleName); err != nil {
			return err
		}
		if a.Databases == nil || len(*a.Databases) == 0 {
			return clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: field redisRules[%d].databases must name at least one database", i)
		}
		for j, d := range *a.Databases {
			if d.SubscriptionID == nil || d.DatabaseID == nil {
				return clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: fields redisRules[%d].databases[%d].subscriptionId and databaseId are required", i, j)
			}
		}
	}
	return nil
}

// aclRoleView is a role on the wire. Rules and databases are kept by id and shown under
// their current names; databases deleted since are left out, and so is a rule left with
// none.
type aclRoleView struct {
	ID         int               `json:"id"`
	Name       string            `json:"name"`
	RedisRules []aclRoleRuleView `json:"redisRules"`
	Users      []aclRoleUserView `json:"users"`
	Status     string            `json:"status"`
}

type aclRoleRuleView struct {
	RuleID    int                   `json:"ruleId"`
	RuleName  string                `json:"ruleName"`
	Databases []aclRoleDatabaseView `json:"databases"`
}

type aclRoleDatabaseView struct {
	SubscriptionID int    `json:"subscriptionId"`
	DatabaseID     int    `json:"databaseId"`
	DatabaseName   string `json:"databaseName"`
	// Regions is always [] here: it applies to Active-Active databases only.
	Regions []string `json:"regions"`
}

type aclRoleUserView struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

func (s *Server) listACLRoles(r *http.Request, c *caller) (int, any, error) {
	ctx := r.Context()
	var (
		roles []*clouddb.ACLRole
		rules []*clouddb.ACLRule
		users []*clouddb.ACLUser
		dbs   []*clouddb.Database
	)
	err := s.Store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		if roles, err = tx.ACLRoles(ctx, c.account.ID); err != nil {
			return err
		}
		if rules, err = tx.ACLRules(ctx, c.account.ID); err != nil {
			return err
		}
		if users, err = tx.ACLUsers(ctx, c.account.ID); err != nil {
			return err
		}
		dbs, _, err = tx.Databases(ctx, clouddb.DatabaseFilter{AccountID: c.account.ID, ExcludeDeleting: true})
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	ruleNames := map[int]string{}
	for _, rule := range rules {
		ruleNames[rule.ID] = rule.Name
	}
	live := map[int]*clouddb.Database{}
	for _, d := range dbs {
		live[d.ID] = d
	}
	views := make([]aclRoleView, 0, len(roles))
	for _, role := range roles {
		v := aclRoleView{ID: role.ID, Name: role.Name, RedisRules: []aclRoleRuleView{}, Users: []aclRoleUserView{}, Status: string(role.Status)}
		for _, rr := range role.Rules {
			rv := aclRoleRuleView{RuleID: rr.RuleID, RuleName: ruleNames[rr.RuleID], Databases: []aclRoleDatabaseView{}}
			for _, ref := range rr.Databases {
				if d := live[ref.DatabaseID]; d != nil && d.SubscriptionID == ref.SubscriptionID {
					rv.Databases = append(rv.Databases, aclRoleDatabaseView{SubscriptionID: ref.SubscriptionID, DatabaseID: ref.DatabaseID,
						DatabaseName: d.Spec.Name, Regions: []string{}})
				}
			}
			if len(rv.Databases) > 0 {
				v.RedisRules = append(v.RedisRules, rv)
			}
		}
		for _, u := range users {
			if u.RoleID == role.ID {
				v.Users = append(v.Users, aclRoleUserView{ID: u.ID, Name: u.Name})
			}
		}
		views = append(views, v)
	}
	return http.StatusOK, map[string]any{"accountId": c.account.ID, "roles": views, "links": []any{}}, nil
}

func (s *Server) createACLRole(r *http.Request, c *caller) (int, any, error) {
	var body aclRoleRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if err := required("ACL role", "name", body.Name); err != nil {
		return 0, nil, err
	}
	if body.RedisRules == nil {
		return 0, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: field redisRules is required")
	}
	if err := checkRoleRules(*body.RedisRules); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandACLRoleCreate}, body)
}

func (s *Server) updateACLRole(r *http.Request, c *caller) (int, any, error) {
	id, err := pathID(r, "roleId")
	if err != nil {
		return 0, nil, err
	}
	var body aclRoleRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Name == nil && body.RedisRules == nil {
		return 0, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL role: send name, redisRules or both")
	}
	if body.RedisRules != nil {
		if err := checkRoleRules(*body.RedisRules); err != nil {
			return 0, nil, err
		}
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandACLRoleUpdate}, aclRoleTask{aclTarget{id}, body})
}

// deleteACLRole answers 200, not 202, as the API does.
func (s *Server) deleteACLRole(r *http.Request, c *caller) (int, any, error) {
	id, err := pathID(r, "roleId")
	if err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandACLRoleDelete}, aclTarget{id})
}
