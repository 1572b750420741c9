package cloudapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

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
			`{"cloudProviders":[{"cloudAccountId":"one"}]}`:           "cloudAccountId",
			`{"cloudProviders":[{"regions":[{"networking":[]}]}]}`:    "networking",
			`{"databases":[{"name":"a","memoryLimitInGb":"big"}]}`:    "memoryLimitInGb",
			`{"databases":[{"name":"a","quantity":1.5}]}`:             "quantity",
			`{"publicEndpointAccess":"true"}`:                         "publicEndpointAccess",
			`{"databases":[{"throughputMeasurement":{"value":"x"}}]}`: "value",
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
			`{"name":"a","alerts":[{"name":"latency","value":"high"}]}`: "value",
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
		{http.MethodPut, db + "/tags", map[string]string{
			`{"tags":"x"}`:                     "tags",
			`{"tags":[{"key":5,"value":"v"}]}`: "key",
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
			require.Contains(t, ae.Error.Description, field, "%s %s %s", ep.method, ep.path, body)
		}
	}
	require.Equal(t, before, e.counts(e.mainAccount))
	tags, err := e.main.GetDatabaseTags(testCtx(t), subID, dbID)
	require.NoError(t, err)
	require.Empty(t, tags)
}
