package cloudapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
)

// Creates and updates that break a rule of replication and clustering are accepted (the
// shape is fine), then fail in processing with the catalogued code, and write nothing.
func TestTopologyRulesRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("topology")
	before := e.counts(e.mainAccount)

	create := func(edit func(*client.CreateDatabase)) client.CreateDatabase {
		b := client.CreateDatabase{Name: client.Ptr("refused"), DatasetSizeInGB: client.Ptr(0.1), Password: client.Ptr("pw")}
		edit(&b)
		return b
	}
	const externalWithout = "database: useExternalEndpointForOSSClusterApi is only valid with supportOSSClusterApi: true"
	creates := []struct {
		name string
		body client.CreateDatabase
		want client.TaskError
	}{
		{"external endpoint without the cluster API", create(func(b *client.CreateDatabase) { b.UseExternalEndpointForOSSClusterAPI = client.Ptr(true) }),
			client.TaskError{Type: "DATABASE_EXTERNAL_ENDPOINT_WITHOUT_OSS_CLUSTER", Status: "400 BAD_REQUEST", Description: externalWithout}},
		{"too many shards", create(func(b *client.CreateDatabase) {
			b.SupportOSSClusterAPI = client.Ptr(true)
			b.ThroughputMeasurement = &client.Throughput{By: "operations-per-second", Value: 400001}
		}), client.TaskError{Type: "DATABASE_INVALID_SHARDS_COUNT", Status: "400 BAD_REQUEST",
			Description: "database: throughputMeasurement asks for 17 shards, and a database has at most 16 (with the OSS Cluster API, one shard per 25000 operations per second, rounded up, or the value itself with by number-of-shards): at most 400000 operations per second"}},
		{"memory too small for a replica", create(func(b *client.CreateDatabase) {
			b.DatasetSizeInGB, b.MemoryLimitInGB, b.Replication = nil, client.Ptr(0.1), client.Ptr(true)
		}), client.TaskError{Type: "DATABASE_INVALID_SIZE", Status: "400 BAD_REQUEST",
			Description: "database: memoryLimitInGb 0.1 leaves a dataset of 0.05 GB with replication (memoryLimitInGb = 2 × datasetSizeInGb), and a dataset must be at least 0.1 GB"}},
		{"memcached with the cluster API", create(func(b *client.CreateDatabase) {
			b.Protocol, b.SupportOSSClusterAPI = client.Ptr("memcached"), client.Ptr(true)
		}), client.TaskError{Type: "DATABASE_MEMCACHED_NOT_SUPPORT_OSS_CLUSTER_API", Status: "400 BAD_REQUEST",
			Description: "database: a memcached database cannot use the OSS Cluster API (and clouddb runs only Redis servers)"}},
	}
	for _, c := range creates {
		tk, err := e.main.CreateDatabase(ctx, subID, c.body)
		requireTaskFails(t, e.main, tk, err, c.want)
	}

	updates := []struct {
		name string
		body client.UpdateDatabase
		want client.TaskError
	}{
		{"external endpoint without the cluster API", client.UpdateDatabase{UseExternalEndpointForOSSClusterAPI: client.Ptr(true)},
			client.TaskError{Type: "DATABASE_EXTERNAL_ENDPOINT_WITHOUT_OSS_CLUSTER", Status: "400 BAD_REQUEST", Description: externalWithout}},
		{"custom hashing rules with the cluster API", client.UpdateDatabase{SupportOSSClusterAPI: client.Ptr(true), RegexRules: []string{`(?<tag>.*)`}},
			client.TaskError{Type: "DATABASE_OSS_CLUSTER_CUSTOM_REGEX_NOT_SUPPORTED", Status: "400 BAD_REQUEST",
				Description: `database: the OSS Cluster API works only with the standard hashing policy: regexRules must be empty or exactly the default pair [".*\\{(?<tag>.*)\\}.*" "(?<tag>.*)"]`}},
		{"too many shards by count", client.UpdateDatabase{SupportOSSClusterAPI: client.Ptr(true), ThroughputMeasurement: &client.Throughput{By: "number-of-shards", Value: 17}},
			client.TaskError{Type: "DATABASE_INVALID_SHARDS_COUNT", Status: "400 BAD_REQUEST",
				Description: "database: throughputMeasurement asks for 17 shards, and a database has at most 16 (with the OSS Cluster API, one shard per 25000 operations per second, rounded up, or the value itself with by number-of-shards): at most 400000 operations per second"}},
	}
	for _, c := range updates {
		tk, err := e.main.UpdateDatabase(ctx, subID, dbID, c.body)
		requireTaskFails(t, e.main, tk, err, c.want)
	}

	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+len(creates)+len(updates), after.tasks)
	after.tasks = before.tasks
	require.Equal(t, before, after, "a refused request wrote something")
	got, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.False(t, got.SupportOSSClusterAPI)
	require.Equal(t, 1, got.Clustering.NumberOfShards)
}

// What a database reads back: replication and throughputMeasurement as sent (the default
// throughput when none was), the size sent and the other derived from it (memoryLimitInGb
// = 2 × datasetSizeInGb with replication), and the shard count of the formula.
func TestTopologyReadBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("readback")

	cases := []struct {
		body                  client.CreateDatabase
		memory, dataset       float64
		replication           bool
		throughput            client.Throughput
		shards                int
		regexRules            []client.RegexRule
		externalEndpointShown bool
	}{
		{body: client.CreateDatabase{Name: client.Ptr("plain"), DatasetSizeInGB: client.Ptr(1.0)},
			memory: 1, dataset: 1, throughput: client.Throughput{By: "operations-per-second", Value: clouddb.OpsPerShard}, shards: 1},
		{body: client.CreateDatabase{Name: client.Ptr("replicated"), DatasetSizeInGB: client.Ptr(1.0), Replication: client.Ptr(true)},
			memory: 2, dataset: 1, replication: true, throughput: client.Throughput{By: "operations-per-second", Value: clouddb.OpsPerShard}, shards: 1},
		{body: client.CreateDatabase{Name: client.Ptr("by-memory"), MemoryLimitInGB: client.Ptr(0.3), Replication: client.Ptr(true)},
			memory: 0.3, dataset: 0.15, replication: true, throughput: client.Throughput{By: "operations-per-second", Value: clouddb.OpsPerShard}, shards: 1},
		{body: client.CreateDatabase{Name: client.Ptr("cluster"), DatasetSizeInGB: client.Ptr(3.0), Replication: client.Ptr(true),
			SupportOSSClusterAPI: client.Ptr(true), UseExternalEndpointForOSSClusterAPI: client.Ptr(true),
			ThroughputMeasurement: &client.Throughput{By: "operations-per-second", Value: 75000}},
			memory: 6, dataset: 3, replication: true, throughput: client.Throughput{By: "operations-per-second", Value: 75000}, shards: 3, externalEndpointShown: true},
		{body: client.CreateDatabase{Name: client.Ptr("by-shards"), DatasetSizeInGB: client.Ptr(1.0), SupportOSSClusterAPI: client.Ptr(true),
			ThroughputMeasurement: &client.Throughput{By: "number-of-shards", Value: 16}},
			memory: 1, dataset: 1, throughput: client.Throughput{By: "number-of-shards", Value: 16}, shards: 16},
		// Without the OSS Cluster API there is one shard, whatever the throughput asks.
		{body: client.CreateDatabase{Name: client.Ptr("no-cluster"), DatasetSizeInGB: client.Ptr(1.0),
			ThroughputMeasurement: &client.Throughput{By: "operations-per-second", Value: 1_000_000}},
			memory: 1, dataset: 1, throughput: client.Throughput{By: "operations-per-second", Value: 1_000_000}, shards: 1},
	}
	defaultRules := []client.RegexRule{{Ordinal: 0, Pattern: `.*\{(?<tag>.*)\}.*`}, {Ordinal: 1, Pattern: `(?<tag>.*)`}}
	for _, c := range cases {
		name := *c.body.Name
		c.body.Password = client.Ptr("pw")
		tk, err := e.main.Wait(ctx)(e.main.CreateDatabase(ctx, subID, c.body))
		require.NoError(t, err, name)
		// A create may resize the subscription (pending): no reconciler here.
		e.activate(subID)
		got, err := e.main.GetDatabase(ctx, subID, tk.ResourceID())
		require.NoError(t, err, name)
		require.Equal(t, c.memory, got.MemoryLimitInGB, name)
		require.Equal(t, c.dataset, got.DatasetSizeInGB, name)
		require.Equal(t, c.replication, got.Replication, name)
		require.Equal(t, c.body.SupportOSSClusterAPI != nil, got.SupportOSSClusterAPI, name)
		require.Equal(t, c.externalEndpointShown, got.UseExternalEndpointForOSSClusterAPI, name)
		require.Equal(t, c.throughput, *got.ThroughputMeasurement, name)
		require.Equal(t, c.shards, got.Clustering.NumberOfShards, name)
		require.Equal(t, defaultRules, got.Clustering.RegexRules, name)
	}
	require.False(t, clouddb.DefaultReplication, "a create without replication has none (README)")
}

// Terraform's PUT always sends useExternalEndpointForOSSClusterApi: false, and re-sends
// the sizes and replication; on a database without the OSS Cluster API it succeeds and
// the compared fields read back as sent. Custom hashing rules stay a database's own
// without the OSS Cluster API, and the default pair is accepted with it.
func TestTopologyTerraformUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("tf-topology")
	path := fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID)
	put := func(body string) {
		t.Helper()
		res := e.do(http.MethodPut, path, mainKey, mainSecret, []byte(body))
		require.Equal(t, http.StatusOK, res.status, "%s", res.body)
		_, err := e.main.WaitForTask(ctx, rawTask(t, res.body)["taskId"].(string))
		require.NoError(t, err, body)
		e.activate(subID)
	}
	get := func() map[string]any {
		t.Helper()
		res := e.do(http.MethodGet, path, mainKey, mainSecret, nil)
		require.Equal(t, http.StatusOK, res.status)
		var db map[string]any
		require.NoError(t, json.Unmarshal(res.body, &db))
		return db
	}

	put(`{"name":"db","datasetSizeInGb":1,"supportOSSClusterApi":false,"useExternalEndpointForOSSClusterApi":false,
		"dataEvictionPolicy":"volatile-lru","replication":true,"throughputMeasurement":{"by":"operations-per-second","value":1000},
		"dataPersistence":"none","replicaOf":[],"sourceIp":["0.0.0.0/0"],"password":"tf-pass-1","alerts":[],"enableTls":false,
		"enableDefaultUser":true}`)
	db := get()
	require.Equal(t, 1.0, db["datasetSizeInGb"])
	require.Equal(t, 2.0, db["memoryLimitInGb"])
	require.Equal(t, true, db["replication"])
	require.Equal(t, false, db["supportOSSClusterApi"])
	require.Equal(t, map[string]any{"by": "operations-per-second", "value": 1000.0}, db["throughputMeasurement"])
	require.Equal(t, 1.0, db["clustering"].(map[string]any)["numberOfShards"])

	put(`{"regexRules":["(?<tag>.*)"],"useExternalEndpointForOSSClusterApi":false}`)
	require.Equal(t, []any{map[string]any{"ordinal": 0.0, "pattern": "(?<tag>.*)"}}, get()["clustering"].(map[string]any)["regexRules"])

	// The OSS Cluster API does not turn on for a live database (nor would it reshard).
	res := e.do(http.MethodPut, path, mainKey, mainSecret, []byte(`{"supportOSSClusterApi":true,"useExternalEndpointForOSSClusterApi":true,
		"regexRules":[".*\\{(?<tag>.*)\\}.*","(?<tag>.*)"],"throughputMeasurement":{"by":"operations-per-second","value":25000}}`))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	_, err := e.main.WaitForTask(ctx, rawTask(t, res.body)["taskId"].(string))
	require.ErrorContains(t, err, clouddb.ErrTypeTopologyChangeNotSupported)
	require.Equal(t, false, get()["supportOSSClusterApi"])
	require.Equal(t, 1.0, get()["clustering"].(map[string]any)["numberOfShards"])
}
