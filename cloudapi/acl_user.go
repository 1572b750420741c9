package cloudapi

import (
	"errors"
	"net/http"

	"clouddb"
)

func (s *Server) registerACLUserRoutes() {
	s.route("GET /acl/users", s.listACLUsers)
	s.route("POST /acl/users", s.createACLUser)
	s.route("GET /acl/users/{userId}", s.getACLUser)
	s.route("PUT /acl/users/{userId}", s.updateACLUser)
	s.route("DELETE /acl/users/{userId}", s.deleteACLUser)
}

// aclUserRequest is the body of a user create or update. An update takes role and
// password; a name sent with it is passed on for the task to refuse if it differs.
type aclUserRequest struct {
	Name     *string `json:"name,omitempty"`
	Role     *string `json:"role,omitempty"`
	Password *string `json:"password,omitempty"`
}

// aclUserTask is the payload of the user commands.
type aclUserTask struct {
	aclTarget
	aclUserRequest
}

// aclUserView is a user on the wire: its role by its current name, never its password.
type aclUserView struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Status string `json:"status"`
	Links  []any  `json:"links"`
}

func newACLUserView(u *clouddb.ACLUser, roleNames map[int]string) aclUserView {
	return aclUserView{ID: u.ID, Name: u.Name, Role: roleNames[u.RoleID], Status: string(u.Status), Links: []any{}}
}

// roleNames maps the account's role ids to their names.
func roleNames(r *http.Request, tx clouddb.Tx, c *caller) (map[int]string, error) {
	roles, err := tx.ACLRoles(r.Context(), c.account.ID)
	if err != nil {
		return nil, err
	}
	names := make(map[int]string, len(roles))
	for _, role := range roles {
		names[role.ID] = role.Name
	}
	return names, nil
}

func (s *Server) listACLUsers(r *http.Request, c *caller) (int, any, error) {
	var (
		users []*clouddb.ACLUser
		names map[int]string
	)
	err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var err error
		if users, err = tx.ACLUsers(r.Context(), c.account.ID); err != nil {
			return err
		}
		names, err = roleNames(r, tx, c)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	views := make([]aclUserView, 0, len(users))
	for _, u := range users {
		views = append(views, newACLUserView(u, names))
	}
	return http.StatusOK, map[string]any{"accountId": c.account.ID, "users": views, "links": []any{}}, nil
}

// getACLUser answers a user, or 404 once it is gone: a deleted user reads as deleting
// until the servers no longer have it.
func (s *Server) getACLUser(r *http.Request, c *caller) (int, any, error) {
	id, err := pathID(r, "userId")
	if err != nil {
		return 0, nil, err
	}
	var (
		u     *clouddb.ACLUser
		names map[int]string
	)
	err = s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var txErr error
		if u, txErr = tx.ACLUser(r.Context(), c.account.ID, id); txErr != nil {
			return txErr
		}
		names, txErr = roleNames(r, tx, c)
		return txErr
	})
	if errors.Is(err, clouddb.ErrNotFound) {
		return 0, nil, clouddb.NotFound(clouddb.ErrTypeACLUserNotFound, "ACL user %d not found", id)
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, newACLUserView(u, names), nil
}

func (s *Server) createACLUser(r *http.Request, c *caller) (int, any, error) {
	var body aclUserRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"name", body.Name}, {"role", body.Role}, {"password", body.Password}} {
		if err := required("ACL user", f.name, f.v); err != nil {
			return 0, nil, err
		}
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandACLUserCreate}, body)
}

// updateACLUser answers 200, not 202, as the API does.
func (s *Server) updateACLUser(r *http.Request, c *caller) (int, any, error) {
	id, err := pathID(r, "userId")
	if err != nil {
		return 0, nil, err
	}
	var body aclUserRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Role == nil && body.Password == nil {
		return 0, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL user: send role, password or both (a user's name cannot change)")
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandACLUserUpdate}, aclUserTask{aclTarget{id}, body})
}

func (s *Server) deleteACLUser(r *http.Request, c *caller) (int, any, error) {
	id, err := pathID(r, "userId")
	if err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandACLUserDelete}, aclTarget{id})
}
