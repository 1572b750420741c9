package cloudapi

import (
	"net/http"

	"clouddb"
)

// registerACLRoutes registers the ACL endpoints: Redis rules, roles and users. A PUT or a
// DELETE of an id the account does not have is accepted, and its task fails with the
// resource's 404, as the API's own fixtures show; every other rule of the catalogue
// (names, rule syntax, passwords, references) is checked by the task as well. Only a
// malformed body or a missing required field is refused here.
func (s *Server) registerACLRoutes() {
	s.route("GET /acl/redisRules", s.listACLRules)
	s.route("POST /acl/redisRules", s.createACLRule)
	s.route("PUT /acl/redisRules/{ruleId}", s.updateACLRule)
	s.route("DELETE /acl/redisRules/{ruleId}", s.deleteACLRule)
	s.registerACLRoleRoutes()
	s.registerACLUserRoutes()
}

// aclRuleRequest is the body of a rule create or update.
type aclRuleRequest struct {
	Name      *string `json:"name,omitempty"`
	RedisRule *string `json:"redisRule,omitempty"`
}

// aclTarget is the id an ACL update or delete targets, carried in the task's payload
// beside the body: a task has no column for it.
type aclTarget struct {
	ID int `json:"id,omitempty"`
}

// aclRuleTask is the payload of the rule commands.
type aclRuleTask struct {
	aclTarget
	aclRuleRequest
}

// aclRuleView is a rule on the wire: its text is sent as redisRule and read back as acl.
type aclRuleView struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	ACL       string `json:"acl"`
	IsDefault bool   `json:"isDefault"`
	Status    string `json:"status"`
}

func (s *Server) listACLRules(r *http.Request, c *caller) (int, any, error) {
	var rules []*clouddb.ACLRule
	err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var err error
		rules, err = tx.ACLRules(r.Context(), c.account.ID)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	views := make([]aclRuleView, 0, len(rules))
	for _, rule := range rules {
		views = append(views, aclRuleView{ID: rule.ID, Name: rule.Name, ACL: rule.ACL, IsDefault: rule.IsDefault, Status: string(rule.Status)})
	}
	return http.StatusOK, map[string]any{"accountId": c.account.ID, "redisRules": views, "links": []any{}}, nil
}

// required refuses a required string field that is absent or empty.
func required(resource, field string, v *string) error {
	if v == nil || *v == "" {
		return clouddb.Invalid(clouddb.ErrTypeInvalidField, "%s: field %s is required", resource, field)
	}
	return nil
}

func (s *Server) createACLRule(r *http.Request, c *caller) (int, any, error) {
	var body aclRuleRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if err := required("ACL redis rule", "name", body.Name); err != nil {
		return 0, nil, err
	}
	if err := required("ACL redis rule", "redisRule", body.RedisRule); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandACLRuleCreate}, body)
}

func (s *Server) updateACLRule(r *http.Request, c *caller) (int, any, error) {
	id, err := pathID(r, "ruleId")
	if err != nil {
		return 0, nil, err
	}
	var body aclRuleRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Name == nil && body.RedisRule == nil {
		return 0, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL redis rule: send name, redisRule or both")
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandACLRuleUpdate}, aclRuleTask{aclTarget{id}, body})
}

func (s *Server) deleteACLRule(r *http.Request, c *caller) (int, any, error) {
	id, err := pathID(r, "ruleId")
	if err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandACLRuleDelete}, aclTarget{id})
}
