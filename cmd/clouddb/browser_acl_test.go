package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// TestBrowserLogsInAsCloudACLUser: a clouddb database's ACL user (rule, role and user made
// through the cloud API) is a browser record's username: the connection test logs in as
// it, and its keys are browsed with its rights; a wrong password is refused.
func TestBrowserLogsInAsCloudACLUser(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	sub, db := s.activeSubscription(ctx, "browse-acl", 0.1)
	require.NoError(t, redisOf(t, db).Set(ctx, "app:greeting", "hello", 0).Err())
	roleID := s.completed(ctx)(s.c.CreateRole(ctx, client.CreateRole{Name: client.Ptr("viewer"), RedisRules: []client.RoleRule{
		{RuleName: "Read-Only", Databases: []client.RoleDatabase{{SubscriptionID: sub, DatabaseID: db.ID}}},
	}}))
	_, err := s.c.WaitForRoleStatus(ctx, roleID, client.ACLActive)
	require.NoError(t, err)
	const user, pass = "bob", "Bob.pa55word"
	userID := s.completed(ctx)(s.c.CreateUser(ctx, client.CreateUser{Name: client.Ptr(user), Role: client.Ptr("viewer"), Password: client.Ptr(pass)}))
	_, err = s.c.WaitForUserStatus(ctx, userID, client.ACLActive)
	require.NoError(t, err)

	host, port, err := net.SplitHostPort(db.PublicEndpoint)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	base := "http://" + s.m.BrowserAddr + "/api"
	browserAPI := browserAPIClient(t) // checks the traffic against the OpenAPI document
	post := func(name, password string) (int, []byte) {
		body, merr := json.Marshal(map[string]any{"name": name, "connectionType": "STANDALONE",
			"host": host, "port": p, "username": user, "password": password})
		require.NoError(t, merr)
		resp, perr := browserAPI.Post(base+"/db/", "application/json", bytes.NewReader(body))
		require.NoError(t, perr)
		defer resp.Body.Close()
		b, rerr := io.ReadAll(resp.Body)
		require.NoError(t, rerr)
		return resp.StatusCode, b
	}
	status, b := post("as-"+user, pass)
	require.Equal(t, http.StatusCreated, status, string(b))
	require.NotContains(t, string(b), pass)
	var rec struct {
		ID       int    `json:"id"`
		Username string `json:"username"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	require.Equal(t, user, rec.Username)

	resp, err := browserAPI.Get(base + "/db/" + strconv.Itoa(rec.ID) + "/keys/app:greeting")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Contains(t, string(b), `"hello"`)

	status, b = post("wrong-password", "Wrong.pa55word")
	require.Equal(t, http.StatusFailedDependency, status, string(b))
}
