package cloudapi_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goTypeName matches a Go type name as encoding/json puts it in a field path
// (DatabaseSpec.datasetSizeInGb) or its messages (Go struct field, float64).
var goTypeName = regexp.MustCompile(`[A-Z][a-z]+[A-Z]\w*\.|Go (struct|value)|int64|float64`)

// Every POST and PUT that takes a body answers a malformed one with a 400 JSON error that
// names the offending field where there is one, and enqueues nothing.
func TestMalformedBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID, dbID := e.activeSubscription("target")
	caID := e.createCloudAccount(e.main, "target")
	before := e.counts(e.mainAccount)

	sub := fmt.Sprintf("/v1/subscriptions/%d", subID)
	db := fmt.Sprintf("%s/databases/%d", sub, dbID)
	ca := fmt.Sprintf("/v1/cloud-accounts/%d", caID)
	// wrongType maps a body with a field of the wrong JSON type to the field name the
	// description must carry.
	endpoints := []struct {
		method, path string
		wrongType    map[string]string
	}{
		{http.MethodPost, "/v1/subscriptions", map[string]string{
			`{"name":5}`:                                              "name",
			`{"paymentMethodId":"x"}`:                                 "paymentMethodId",
			`{"dryRun":"yes"}`:                                        "dryRun",
			`{"cloudProviders":{"cloudAccountId":1}}`:                 "cloudProviders",
			`{"cloudProviders":[{"cloudAccountId":"one"}]}`:           "cloudProviders[0].cloudAccountId",
			`{"cloudProviders":[{"regions":[{"networking":[]}]}]}`:    "cloudProviders[0].regions[0].networking",
			`{"databases":[{"name":"a","memoryLimitInGb":"big"}]}`:    "databases[0].memoryLimitInGb",
			`{"databases":[{"name":"a","quantity":1.5}]}`:             "databases[0].quantity",
			`{"publicEndpointAccess":"true"}`:                         "publicEndpointAccess",
			`{"databases":[{"throughputMeasurement":{"value":"x"}}]}`: "databases[0].throughputMeasurement.value",
		}},
		{http.MethodPut, sub, map[string]string{
			`{"name":5}`:                     "name",
			`{"paymentMethodId":"x"}`:        "paymentMethodId",
			`{"publicEndpointAccess":"yes"}`: "publicEndpointAccess",
		}},
		{http.MethodPost, sub + "/databases", map[string]string{
			`{"name":5}`:                                                "name",
			`{"name":"a","memoryLimitInGb":"big"}`:                      "memoryLimitInGb",
			`{"name":"a","password":123}`:                               "password",
			`{"name":"a","replication":"no"}`:                           "replication",
			`{"name":"a","sourceIp":"0.0.0.0/0"}`:                       "sourceIp",
			`{"name":"a","clientTlsCertificates":5}`:                    "clientTlsCertificates",
			`{"name":"a","replicaOf":"redis://h:1"}`:                    "replicaOf",
			`{"name":"a","alerts":[{"name":"latency","value":"high"}]}`: "alerts[0].value",
		}},
		{http.MethodPut, db, map[string]string{
			`{"name":5}`:                     "name",
			`{"memoryLimitInGb":"big"}`:      "memoryLimitInGb",
			`{"alerts":{}}`:                  "alerts",
			`{"enableDefaultUser":"yes"}`:    "enableDefaultUser",
			`{"clientTlsCertificates":[5]}`:  "clientTlsCertificates",
			`{"replicaOf":{"endpoints":[]}}`: "replicaOf",
		}},
		{http.MethodPost, "/v1/cloud-accounts", map[string]string{
			`{"name":5}`:         "name",
			`{"accessKeyId":[]}`: "accessKeyId",
			`{"provider":true}`:  "provider",
		}},
		{http.MethodPut, ca, map[string]string{
			`{"name":5}`:             "name",
			`{"consolePassword":{}}`: "consolePassword",
		}},
		{http.MethodPost, db + "/import", map[string]string{
			`{"sourceType":5}`:                          "sourceType",
			`{"sourceType":"http","importFromUri":[1]}`: "importFromUri[0]",
		}},
		{http.MethodPut, db + "/tags", map[string]string{
			`{"tags":"x"}`:                     "tags",
			`{"tags":[{"key":5,"value":"v"}]}`: "tags[0].key",
		}},
	}
	for _, ep := range endpoints {
		shapes := map[string][]byte{
			"invalid JSON":     []byte(`{"name":`),
			"trailing garbage": []byte(`{"name":"a"} {}`),
			"array":            []byte(`[{"name":"a"}]`),
			"string":           []byte(`"name"`),
			"empty":            nil,
		}
		for name, body := range shapes {
			res := e.do(ep.method, ep.path, mainKey, mainSecret, body)
			ae := requireError(t, res, http.StatusBadRequest, "MALFORMED_BODY")
			require.NotEmpty(t, ae.Error.Description, "%s %s: %s", ep.method, ep.path, name)
		}
		for body, field := range ep.wrongType {
			res := e.do(ep.method, ep.path, mainKey, mainSecret, []byte(body))
			ae := requireError(t, res, http.StatusBadRequest, "INVALID_FIELD")
			require.Contains(t, ae.Error.Description, "field "+field+": expected ", "%s %s %s", ep.method, ep.path, body)
			require.NotRegexp(t, goTypeName, ae.Error.Description, "%s %s %s: names a Go type", ep.method, ep.path, body)
		}
	}
	// The backup body is optional, but one of the wrong shape is refused the same way.
	ae := requireError(t, e.do(http.MethodPost, db+"/backup", mainKey, mainSecret, []byte(`{"adhocBackupPath":5}`)), http.StatusBadRequest, "INVALID_FIELD")
	require.Equal(t, "field adhocBackupPath: expected a string, got number", ae.Error.Description)
	require.Equal(t, before, e.counts(e.mainAccount))
	tags, err := e.main.GetDatabaseTags(testCtx(t), subID, dbID)
	require.NoError(t, err)
	require.Empty(t, tags)
}

// Paths with dot segments answer a 400 JSON error, not the mux's redirect with an HTML
// body; nothing is followed or served.
func TestDotSegmentPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/v1/../v1/subscriptions", "/v1/subscriptions/./1", "/v1/subscriptions/%2e%2e/subscriptions", "/v1/./subscriptions", "/../v1/subscriptions"} {
		req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("x-api-key", mainKey)
		req.Header.Set("x-api-secret-key", mainSecret)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		ae := requireError(t, response{resp.StatusCode, resp.Header, b}, http.StatusBadRequest, "BAD_REQUEST")
		require.Contains(t, ae.Error.Description, "has a . or .. segment", path)
		require.Empty(t, resp.Header.Get("Location"), path)
		require.False(t, strings.Contains(string(b), "<a href"), path)
	}
}
