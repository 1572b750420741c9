package cloudapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The bodies the Terraform provider sends (reference §14) are accepted, and the fields it
// compares on its next plan read back exactly as sent, so a second plan shows no change.
func TestTerraformBodiesReadBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)

	createSub := fmt.Sprintf(`{"name":"tf-sub","dryRun":false,"paymentMethodId":%d,"paymentMethod":"credit-card","memoryStorage":"ram",
		"cloudProviders":[{"provider":"AWS","cloudAccountId":1,"regions":[{"region":"us-east-1","multipleAvailabilityZones":false,
		"preferredAvailabilityZones":["use1-az1"],"networking":{"deploymentCIDR":"10.0.0.0/24"}}]}],
		"databases":[{"name":"tf-plan","protocol":"redis","datasetSizeInGb":1,"supportOSSClusterApi":false,"replication":false,
		"throughputMeasurement":{"by":"operations-per-second","value":1000},"quantity":1,
		"localThroughputMeasurement":[{"region":"us-east-1","writeOperationsPerSecond":null,"readOperationsPerSecond":null}]}],
		"publicEndpointAccess":true}`, e.mainPM)
	res := e.do(http.MethodPost, "/v1/subscriptions", mainKey, mainSecret, []byte(createSub))
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	done, err := e.main.WaitForTask(ctx, rawTask(t, res.body)["taskId"].(string))
	require.NoError(t, err)
	subID := done.ResourceID()
	// No reconciler here: the test provisions the subscription through the store.
	e.activate(subID)

	res = e.do(http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d", subID), mainKey, mainSecret,
		[]byte(fmt.Sprintf(`{"name":"tf-sub","paymentMethodId":%d,"publicEndpointAccess":true}`, e.mainPM)))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	_, err = e.main.WaitForTask(ctx, rawTask(t, res.body)["taskId"].(string))
	require.NoError(t, err)
	e.activate(subID)

	sub, err := e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, "tf-sub", sub.Name)
	require.Equal(t, "ram", sub.MemoryStorage)
	require.Equal(t, e.mainPM, sub.PaymentMethodID)
	require.Len(t, sub.CloudDetails, 1)
	cd := sub.CloudDetails[0]
	require.Equal(t, "AWS", cd.Provider)
	require.Equal(t, 1, cd.CloudAccountID)
	require.Len(t, cd.Regions, 1)
	require.Equal(t, "us-east-1", cd.Regions[0].Region)
	require.False(t, cd.Regions[0].MultipleAvailabilityZones)
	require.Equal(t, []string{"use1-az1"}, cd.Regions[0].PreferredAvailabilityZones)
	require.Equal(t, "10.0.0.0/24", cd.Regions[0].Networking[0].DeploymentCIDR)

	createDB := `{"name":"tf-db","protocol":"redis","datasetSizeInGb":1,"supportOSSClusterApi":false,"dataPersistence":"none",
		"dataEvictionPolicy":"volatile-lru","replication":false,"throughputMeasurement":{"by":"operations-per-second","value":1000},
		"password":"tf-pass-1"}`
	res = e.do(http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases", subID), mainKey, mainSecret, []byte(createDB))
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	done, err = e.main.WaitForTask(ctx, rawTask(t, res.body)["taskId"].(string))
	require.NoError(t, err)
	dbID := done.ResourceID()
	// The create grew the subscription past its capacity: it is pending until resized.
	e.activate(subID)

	updateDB := `{"name":"tf-db","datasetSizeInGb":1,"supportOSSClusterApi":false,"useExternalEndpointForOSSClusterApi":false,
		"dataEvictionPolicy":"volatile-lru","replication":false,"throughputMeasurement":{"by":"operations-per-second","value":1000},
		"dataPersistence":"none","replicaOf":[],"sourceIp":["0.0.0.0/0"],"password":"tf-pass-2","alerts":[],"enableTls":false,
		"enableDefaultUser":true}`
	res = e.do(http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID), mainKey, mainSecret, []byte(updateDB))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	_, err = e.main.WaitForTask(ctx, rawTask(t, res.body)["taskId"].(string))
	require.NoError(t, err)
	res = e.do(http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/tags", subID, dbID), mainKey, mainSecret, []byte(`{"tags":[]}`))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.JSONEq(t, `{"tags":[]}`, string(res.body))

	res = e.do(http.MethodGet, fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID), mainKey, mainSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	var db map[string]any
	require.NoError(t, json.Unmarshal(res.body, &db))
	require.Equal(t, "tf-db", db["name"])
	require.Equal(t, "redis", db["protocol"])
	require.Equal(t, 1.0, db["datasetSizeInGb"])
	require.Equal(t, "none", db["dataPersistence"])
	require.Equal(t, "volatile-lru", db["dataEvictionPolicy"])
	require.Equal(t, false, db["replication"])
	require.Equal(t, false, db["supportOSSClusterApi"])
	require.Equal(t, map[string]any{"by": "operations-per-second", "value": 1000.0}, db["throughputMeasurement"])
	sec := db["security"].(map[string]any)
	require.Equal(t, "tf-pass-2", sec["password"])
	require.Equal(t, false, sec["enableTls"])
	require.Equal(t, true, sec["enableDefaultUser"])
	require.Equal(t, false, sec["tlsClientAuthentication"])
	require.NotContains(t, db, "replicaOf")
	require.NotContains(t, db, "activeActiveRedis")
}
