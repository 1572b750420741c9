package task

import (
	"context"
	"errors"

	"clouddb"
)

// aclUserRequest is the payload of the user commands; ID names the user an update or a
// delete targets. The payload is sealed at rest like every task's, and the password
// never leaves it but into the user's sealed row.
type aclUserRequest struct {
	ID       int     `json:"id,omitempty"`
	Name     *string `json:"name,omitempty"`
	Role     *string `json:"role,omitempty"`
	Password *string `json:"password,omitempty"`
}

func errUserNotFound(id int) error {
	return clouddb.NotFound(clouddb.ErrTypeACLUserNotFound, "ACL user %d not found", id)
}

func errUserNameTaken(name string) error {
	return clouddb.Conflict(clouddb.ErrTypeACLUserNameTaken, "ACL user: name %q is already used by another user", name)
}

// roleByName is the account's role with the name, which a user names it by.
func roleByName(ctx context.Context, tx clouddb.Tx, accountID int, name string) (*clouddb.ACLRole, error) {
	roles, err := tx.ACLRoles(ctx, accountID)
	if err != nil {
		return nil, err
	}
	if r := roleNamed(roles, name, 0); r != nil {
		return r, nil
	}
	return nil, clouddb.Invalid(clouddb.ErrTypeACLRoleDoesNotExist, "%s (role %q)", clouddb.ACLRoleDoesNotExistMessage, name)
}

func createACLUser(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var req aclUserRequest
	if err := decode(t, &req); err != nil {
		return 0, err
	}
	if req.Name == nil || req.Role == nil || req.Password == nil {
		return 0, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL user: name, role and password are required")
	}
	if err := clouddb.ValidateACLUserName(*req.Name); err != nil {
		return 0, err
	}
	if err := clouddb.ValidateACLPassword(*req.Password); err != nil {
		return 0, err
	}
	role, err := roleByName(ctx, tx, t.AccountID, *req.Role)
	if err != nil {
		return 0, err
	}
	users, err := tx.ACLUsers(ctx, t.AccountID)
	if err != nil {
		return 0, err
	}
	for _, u := range users {
		if u.Name == *req.Name {
			return 0, errUserNameTaken(u.Name)
		}
	}
	u := &clouddb.ACLUser{AccountID: t.AccountID, Name: *req.Name, RoleID: role.ID, Password: *req.Password,
		Status: clouddb.ACLPending, Generation: 1}
	if err := tx.CreateACLUser(ctx, u); errors.Is(err, clouddb.ErrConflict) {
		return 0, errUserNameTaken(u.Name)
	} else if err != nil {
		return 0, err
	}
	return u.ID, v.log(ctx, clouddb.LogTypeACLUser, u.Name, u.ID, "ACL user %q (id %d) created with role %q", u.Name, u.ID, role.Name)
}

// findACLUser is a user of the account; one being deleted is gone already.
func findACLUser(ctx context.Context, tx clouddb.Tx, accountID, id int) (*clouddb.ACLUser, error) {
	u, err := tx.ACLUser(ctx, accountID, id)
	if errors.Is(err, clouddb.ErrNotFound) || (err == nil && u.Status == clouddb.ACLDeleting) {
		return nil, errUserNotFound(id)
	}
	return u, err
}

// updateACLUser changes a user's role or password; the user goes pending until every
// database its role reaches has the change. A name cannot change: the same name is
// accepted, another one refused rather than ignored.
func updateACLUser(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var req aclUserRequest
	if err := decode(t, &req); err != nil {
		return 0, err
	}
	u, err := findACLUser(ctx, tx, t.AccountID, req.ID)
	if err != nil {
		return 0, err
	}
	if req.Name != nil && *req.Name != u.Name {
		return 0, clouddb.Invalid(clouddb.ErrTypeInvalidField, "ACL user: the name of user %q cannot change; create another user instead", u.Name)
	}
	if req.Password != nil {
		if err := clouddb.ValidateACLPassword(*req.Password); err != nil {
			return 0, err
		}
		u.Password = *req.Password
	}
	roleName := ""
	if req.Role != nil {
		role, err := roleByName(ctx, tx, t.AccountID, *req.Role)
		if err != nil {
			return 0, err
		}
		u.RoleID, roleName = role.ID, role.Name
	}
	u.Status = clouddb.ACLPending
	u.Generation++
	if err := tx.UpdateACLUser(ctx, u); err != nil {
		return 0, err
	}
	if roleName == "" {
		return u.ID, v.log(ctx, clouddb.LogTypeACLUser, u.Name, u.ID, "ACL user %q (id %d) updated", u.Name, u.ID)
	}
	return u.ID, v.log(ctx, clouddb.LogTypeACLUser, u.Name, u.ID, "ACL user %q (id %d) updated with role %q", u.Name, u.ID, roleName)
}

// deleteACLUser marks the user deleting: the reconciler removes it from the servers, then
// deletes the row, when GET /acl/users/{id} starts answering 404.
func deleteACLUser(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	var req aclUserRequest
	if err := decode(t, &req); err != nil {
		return 0, err
	}
	u, err := findACLUser(ctx, tx, t.AccountID, req.ID)
	if err != nil {
		return 0, err
	}
	u.Status = clouddb.ACLDeleting
	u.Generation++
	if err := tx.UpdateACLUser(ctx, u); err != nil {
		return 0, err
	}
	return u.ID, v.log(ctx, clouddb.LogTypeACLUser, u.Name, u.ID, "ACL user %q (id %d) deleted", u.Name, u.ID)
}
