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
)

// TestBrowserRegistersCloudDatabase: a database made by the cloud API is registered in the
// browser local API with the endpoint and password its GET returns; the connection test
// reaches the real server, and its keys can be browsed.
func TestBrowserRegistersCloudDatabase(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	require.NotEmpty(t, s.m.BrowserAddr)
	_, db := s.activeSubscription(ctx, "browse", 0.1)
	require.NoError(t, redisOf(t, db).Set(ctx, "browsed", "value", 0).Err())

	host, port, err := net.SplitHostPort(db.PublicEndpoint)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"name": "from-cloud", "connectionType": "STANDALONE", "host": host, "port": p, "password": db.Security.Password})
	require.NoError(t, err)
	base := "http://" + s.m.BrowserAddr + "/api"
	browserAPI := browserAPIClient(t) // checks the traffic against the OpenAPI document
	resp, err := browserAPI.Post(base+"/db/", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	require.NotContains(t, string(b), db.Security.Password, "the browser API never returns a password")
	var rec struct {
		ID int `json:"id"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	require.Positive(t, rec.ID)

	resp2, err := browserAPI.Get(base + "/db/" + strconv.Itoa(rec.ID) + "/keys/browsed")
	require.NoError(t, err)
	defer resp2.Body.Close()
	b, err = io.ReadAll(resp2.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp2.StatusCode, string(b))
	require.Contains(t, string(b), `"value"`)

	// A wrong password is caught by the connection test and nothing is saved.
	body, err = json.Marshal(map[string]any{"name": "wrong", "connectionType": "STANDALONE", "host": host, "port": p, "password": "not-it"})
	require.NoError(t, err)
	resp3, err := browserAPI.Post(base+"/db/", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp3.Body.Close()
	require.Equal(t, http.StatusFailedDependency, resp3.StatusCode)
}
