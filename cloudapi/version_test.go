package cloudapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
	"clouddb/task"
)

// threeVersions offers Redis 7.0, 7.2 (the default) and 7.4 to the API and to the task
// engine, as `clouddb serve` does with three --redis-server binaries.
func threeVersions(s *cloudapi.Server) {
	v := clouddb.RedisVersions{Default: "7.2", Offered: []string{"7.0", "7.2", "7.4"},
		Full: map[string]string{"7.0": "7.0.15", "7.2": "7.2.4", "7.4": "7.4.1"}}
	s.RedisVersions = v
	s.Tasks.(*task.Engine).RedisVersions = v
}

// storedDatabase reads a database straight from the store.
func (e *env) storedDatabase(id int) *clouddb.Database {
	e.t.Helper()
	var d *clouddb.Database
	ctx := context.Background()
	require.NoError(e.t, e.store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		d, err = tx.Database(ctx, 0, id)
		return err
	}))
	return d
}

// setActive marks a database active, as the reconciler would once it is provisioned.
func (e *env) setActive(id int) {
	e.t.Helper()
	e.settle(id, clouddb.DatabaseActive)
}

// settle sets the database's status at its current generation through the store the
// reconciler of `clouddb serve` uses (see task.RecordUpgradeOutcomes), as its
// provisioning or supervision does.
func (e *env) settle(id int, status clouddb.DatabaseStatus) {
	e.t.Helper()
	ctx := context.Background()
	require.NoError(e.t, task.RecordUpgradeOutcomes(e.store).Update(ctx, func(tx clouddb.Tx) error {
		d, err := tx.Database(ctx, 0, id)
		if err != nil {
			return err
		}
		_, err = tx.SetDatabaseStatus(ctx, id, d.Generation, status, "")
		return err
	}))
}

// newDatabase creates a database with the main key and returns its id.
func (e *env) newDatabase(subID int, req client.CreateDatabase) int {
	e.t.Helper()
	ctx := testCtx(e.t)
	if req.Password == nil {
		req.Password = client.Ptr("pw-1234")
	}
	if req.MemoryLimitInGB == nil {
		req.MemoryLimitInGB = client.Ptr(0.1)
	}
	tk, err := e.main.Wait(ctx)(e.main.CreateDatabase(ctx, subID, req))
	require.NoError(e.t, err)
	require.Positive(e.t, tk.ResourceID())
	return tk.ResourceID()
}

// rawTask reads GET /tasks/{id} as JSON.
func (e *env) rawTask(id string) map[string]any {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/tasks/"+id, mainKey, mainSecret, nil)
	require.Equal(e.t, http.StatusOK, res.status, "%s", res.body)
	var out map[string]any
	require.NoError(e.t, json.Unmarshal(res.body, &out))
	return out
}

func TestRedisVersionsListsTheOfferedVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeVersions)
	subID := e.createSubscription(e.main, e.mainPM, "versions")
	want := `{"redisVersions":[{"version":"7.0","isPreview":false,"isDefault":false},{"version":"7.2","isPreview":false,"isDefault":true},{"version":"7.4","isPreview":false,"isDefault":false}]}`
	for _, p := range []string{"/v1/subscriptions/redis-versions", fmt.Sprintf("/v1/subscriptions/redis-versions%%3FsubscriptionId=%d", subID)} {
		res := e.do(http.MethodGet, p, mainKey, mainSecret, nil)
		require.Equal(t, http.StatusOK, res.status, "%s", res.body)
		require.JSONEq(t, want, string(res.body), "no eolDate is invented")
	}

	// Without versions configured, the one version of the API's RedisVersion.
	plain := newEnv(t)
	res := plain.do(http.MethodGet, "/v1/subscriptions/redis-versions", mainKey, mainSecret, nil)
	require.JSONEq(t, `{"redisVersions":[{"version":"7.0","isPreview":false,"isDefault":true}]}`, string(res.body))
}

func TestDatabaseRedisVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeVersions)
	ctx := testCtx(t)
	subID, planDB := e.activeSubscription("dbv")

	plan, err := e.main.GetDatabase(ctx, subID, planDB)
	require.NoError(t, err)
	require.Equal(t, "7.2", plan.RedisVersion, "a creation-plan database gets the default")
	require.Equal(t, "7.2.4", plan.RedisVersionCompliance)

	dflt := e.newDatabase(subID, client.CreateDatabase{Name: client.Ptr("dflt")})
	require.Equal(t, "7.2", e.storedDatabase(dflt).Spec.RedisVersion, "the default is stored, not left empty")
	for _, v := range []string{"7.0", "7.2", "7.4"} {
		id := e.newDatabase(subID, client.CreateDatabase{Name: client.Ptr("v" + strings.ReplaceAll(v, ".", "")), RedisVersion: client.Ptr(v)})
		got, getErr := e.main.GetDatabase(ctx, subID, id)
		require.NoError(t, getErr)
		require.Equal(t, v, got.RedisVersion, "exactly the major.minor asked for")
		require.Equal(t, map[string]string{"7.0": "7.0.15", "7.2": "7.2.4", "7.4": "7.4.1"}[v], got.RedisVersionCompliance)
	}

	refused := map[string]string{
		"6.2":    "DATABASE_REDIS_VERSION_IS_NOT_SUPPORTED",
		"8.0":    "DATABASE_REDIS_VERSION_IS_NOT_SUPPORTED",
		"7.2.4":  "DATABASE_REDIS_VERSION_INVALID_VALUE",
		"latest": "DATABASE_REDIS_VERSION_INVALID_VALUE",
		"seven":  "DATABASE_REDIS_VERSION_INVALID_VALUE",
	}
	for v, typ := range refused {
		before := e.counts(e.mainAccount)
		tk, submitErr := e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("bad"), MemoryLimitInGB: client.Ptr(0.1),
			Password: client.Ptr("pw-1234"), RedisVersion: client.Ptr(v)})
		got := requireTaskFailsWith(t, e.main, tk, submitErr, typ, "400 BAD_REQUEST")
		require.Contains(t, got.Description, "redisVersion", v)
		require.Contains(t, got.Description, fmt.Sprintf("%q", v))
		require.Contains(t, got.Description, "7.0, 7.2, 7.4", "names the offered versions")
		after := e.counts(e.mainAccount)
		require.Equal(t, before.databases, after.databases, v)
	}

	// A PUT never changes the version.
	res := e.do(http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dflt), mainKey, mainSecret, []byte(`{"redisVersion":"7.4","name":"renamed"}`))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	var put client.Task
	require.NoError(t, json.Unmarshal(res.body, &put))
	_, err = e.main.WaitForTask(ctx, put.ID)
	require.NoError(t, err)
	got, err := e.main.GetDatabase(ctx, subID, dflt)
	require.NoError(t, err)
	require.Equal(t, "renamed", got.Name)
	require.Equal(t, "7.2", got.RedisVersion)

	// A database stored before versions were reads the default.
	require.NoError(t, e.store.Update(context.Background(), func(tx clouddb.Tx) error {
		d, txErr := tx.Database(ctx, 0, planDB)
		if txErr != nil {
			return txErr
		}
		d.Spec.RedisVersion = ""
		return tx.UpdateDatabase(ctx, d)
	}))
	got, err = e.main.GetDatabase(ctx, subID, planDB)
	require.NoError(t, err)
	require.Equal(t, "7.2", got.RedisVersion)
	require.Equal(t, "7.2.4", got.RedisVersionCompliance)
}

// requireTaskFailsWith waits for a task that must fail with the type and status; it
// returns its response.error.
func requireTaskFailsWith(t *testing.T, c *client.Client, tk *client.Task, submitErr error, typ, status string) client.TaskError {
	t.Helper()
	require.NoError(t, submitErr)
	got, err := c.WaitForTask(testCtx(t), tk.ID)
	require.Error(t, err)
	require.Equal(t, client.TaskFailed, got.Status)
	require.NotNil(t, got.Response.Error)
	require.Equal(t, typ, got.Response.Error.Type, "%+v", got.Response.Error)
	require.Equal(t, status, got.Response.Error.Status)
	require.Nil(t, got.Response.ResourceID)
	return *got.Response.Error
}

func TestSubscriptionRedisVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeVersions)
	ctx := testCtx(t)
	for _, c := range []struct{ given, want string }{{"", "7.2"}, {"latest", "7.4"}, {"7.0", "7.0"}, {"7.4", "7.4"}} {
		body := e.subscriptionBody("sv", e.mainPM, 2, 0.1)
		if c.given != "" {
			body.RedisVersion = client.Ptr(c.given)
		}
		tk, err := e.main.Wait(ctx)(e.main.CreateSubscription(ctx, body))
		require.NoError(t, err, c.given)
		subID := tk.ResourceID()
		e.activate(subID)
		dbs, err := e.main.AllDatabases(ctx, subID)
		require.NoError(t, err)
		require.Len(t, dbs, 2)
		for _, d := range dbs {
			require.Equal(t, c.want, d.RedisVersion, "redisVersion %q", c.given)
		}
		res := e.do(http.MethodGet, fmt.Sprintf("/v1/subscriptions/%d", subID), mainKey, mainSecret, nil)
		require.NotContains(t, string(res.body), "redisVersion", "GET /subscriptions does not return it")
	}

	// A creation-plan database's own version wins over the subscription's.
	body := e.subscriptionBody("own", e.mainPM, 1, 0.1)
	body.RedisVersion = client.Ptr("latest")
	body.Databases[0].RedisVersion = client.Ptr("7.0")
	tk, err := e.main.Wait(ctx)(e.main.CreateSubscription(ctx, body))
	require.NoError(t, err)
	e.activate(tk.ResourceID())
	dbs, err := e.main.AllDatabases(ctx, tk.ResourceID())
	require.NoError(t, err)
	require.Equal(t, "7.0", dbs[0].RedisVersion)

	before := e.counts(e.mainAccount)
	body = e.subscriptionBody("bad", e.mainPM, 1, 0.1)
	body.RedisVersion = client.Ptr("6.2")
	tk, err = e.main.CreateSubscription(ctx, body)
	got := requireTaskFailsWith(t, e.main, tk, err, "SUBSCRIPTION_REDIS_VERSION_INVALID_VALUE", "400 BAD_REQUEST")
	require.Contains(t, got.Description, `redisVersion "6.2"`)
	require.Contains(t, got.Description, "7.0, 7.2, 7.4")
	body.RedisVersion = nil
	body.Databases[0].RedisVersion = client.Ptr("6.2")
	tk, err = e.main.CreateSubscription(ctx, body)
	got = requireTaskFailsWith(t, e.main, tk, err, "DATABASE_REDIS_VERSION_IS_NOT_SUPPORTED", "400 BAD_REQUEST")
	require.Contains(t, got.Description, "subscription: databases[0]: ")
	after := e.counts(e.mainAccount)
	require.Equal(t, before.subscriptions, after.subscriptions)
	require.Equal(t, before.databases, after.databases)
}

func TestUpgradeTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeVersions)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("up")
	id := e.newDatabase(subID, client.CreateDatabase{Name: client.Ptr("old"), RedisVersion: client.Ptr("7.0")})
	e.setActive(id)

	targets, err := e.main.AvailableTargetVersions(ctx, subID, id)
	require.NoError(t, err)
	require.Equal(t, []string{"7.2", "7.4"}, targets)
	_, err = e.main.GetUpgradeStatus(ctx, subID, id)
	require.True(t, client.IsNotFound(err), "never upgraded: %v", err)

	refused := []struct{ target, why string }{
		{"", "targetRedisVersion is required"},
		{"7.0", "already runs Redis 7.0"},
		{"8.0", `targetRedisVersion "8.0" is not offered`},
		{"7.3", `targetRedisVersion "7.3" is not offered`},
	}
	for _, r := range refused {
		before := e.storedDatabase(id)
		req := client.Upgrade{}
		if r.target != "" {
			req.TargetRedisVersion = client.Ptr(r.target)
		}
		tk, submitErr := e.main.UpgradeDatabase(ctx, subID, id, req)
		got := requireTaskFailsWith(t, e.main, tk, submitErr, "DATABASE_UPGRADE_INVALID_REDIS_VERSION", "400 BAD_REQUEST")
		require.Contains(t, got.Description, r.why)
		require.Contains(t, got.Description, "may be upgraded to 7.2, 7.4")
		after := e.storedDatabase(id)
		require.Equal(t, before.Generation, after.Generation, r.target)
		require.Equal(t, clouddb.DatabaseActive, after.Status)
	}

	// The real request: HTTP 200, a task that completes with response {}.
	res := e.do(http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/upgrade", subID, id), mainKey, mainSecret, []byte(`{"targetRedisVersion":"7.2"}`))
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	var submitted client.Task
	require.NoError(t, json.Unmarshal(res.body, &submitted))
	require.Equal(t, "databaseUpgradeRequest", submitted.CommandType)
	done, err := e.main.WaitForTask(ctx, submitted.ID)
	require.NoError(t, err)
	require.Equal(t, client.TaskCompleted, done.Status)
	raw := e.rawTask(submitted.ID)
	require.Equal(t, map[string]any{}, raw["response"], "response {}")

	got, err := e.main.GetDatabase(ctx, subID, id)
	require.NoError(t, err)
	require.Equal(t, "7.2", got.RedisVersion)
	require.Equal(t, "7.2.4", got.RedisVersionCompliance)
	require.Equal(t, client.DatabaseChangePending, got.Status, "pending like an update until the server runs the new binary")
	st, err := e.main.GetUpgradeStatus(ctx, subID, id)
	require.NoError(t, err)
	require.Equal(t, client.UpgradeStatus{DatabaseID: id, TargetRedisVersion: "7.2", Progress: 0, UpgradeStatus: "in-progress"}, *st)
	e.setActive(id)
	st, err = e.main.GetUpgradeStatus(ctx, subID, id)
	require.NoError(t, err)
	require.Equal(t, client.UpgradeStatus{DatabaseID: id, TargetRedisVersion: "7.2", Progress: 100, UpgradeStatus: "done"}, *st)
	logs, err := e.main.Logs(ctx, client.LogQuery{Limit: 1})
	require.NoError(t, err)
	require.Contains(t, logs[0].Description, "upgrade from Redis 7.0 to 7.2")

	// No downgrade.
	tk, err := e.main.UpgradeDatabase(ctx, subID, id, client.Upgrade{TargetRedisVersion: client.Ptr("7.0")})
	got2 := requireTaskFailsWith(t, e.main, tk, err, "DATABASE_UPGRADE_INVALID_REDIS_VERSION", "400 BAD_REQUEST")
	require.Contains(t, got2.Description, "there is no downgrade")
	targets, err = e.main.AvailableTargetVersions(ctx, subID, id)
	require.NoError(t, err)
	require.Equal(t, []string{"7.4"}, targets)

	// Malformed and missing bodies are refused at once.
	res = e.do(http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/upgrade", subID, id), mainKey, mainSecret, []byte(`{"targetRedisVersion":7.4}`))
	requireError(t, res, http.StatusBadRequest, "INVALID_FIELD")
	res = e.do(http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/upgrade", subID, id), mainKey, mainSecret, nil)
	requireError(t, res, http.StatusBadRequest, "MALFORMED_BODY")
	res = e.do(http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases/999999/upgrade", subID), mainKey, mainSecret, []byte(`{"targetRedisVersion":"7.4"}`))
	requireError(t, res, http.StatusNotFound, "DATABASE_NOT_FOUND")
}

// GET …/upgrade reports the upgrade's own outcome, settled with the provisioning that
// carries it: a later change, pending or failed, or a later failure of the server leaves
// it; a change made before the upgrade went through carries it, and so does one after it
// failed (its provisioning runs the target version again).
func TestUpgradeStatusIsTheUpgradesOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeVersions)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("own")
	id := e.newDatabase(subID, client.CreateDatabase{Name: client.Ptr("own-db"), RedisVersion: client.Ptr("7.0")})
	e.setActive(id)
	status := func() string {
		t.Helper()
		st, err := e.main.GetUpgradeStatus(ctx, subID, id)
		require.NoError(t, err)
		require.Equal(t, id, st.DatabaseID)
		require.Equal(t, map[string]float64{"done": 100}[st.UpgradeStatus], st.Progress)
		return st.UpgradeStatus
	}
	upgrade := func(target string) {
		t.Helper()
		tk, err := e.main.UpgradeDatabase(ctx, subID, id, client.Upgrade{TargetRedisVersion: client.Ptr(target)})
		require.NoError(t, err)
		_, err = e.main.WaitForTask(ctx, tk.ID)
		require.NoError(t, err)
	}
	update := func(gb float64) {
		t.Helper()
		tk, err := e.main.UpdateDatabase(ctx, subID, id, client.UpdateDatabase{MemoryLimitInGB: client.Ptr(gb)})
		require.NoError(t, err)
		_, err = e.main.WaitForTask(ctx, tk.ID)
		require.NoError(t, err)
	}

	upgrade("7.2")
	require.Equal(t, "in-progress", status())
	update(0.2) // before the upgrade went through: its provisioning carries it
	require.Equal(t, "in-progress", status())
	upgradeGen := e.storedDatabase(id).Generation
	require.Equal(t, upgradeGen, e.storedDatabase(id).State.Upgrade.Generation)
	e.setActive(id)
	require.Equal(t, "done", status())

	update(0.3)
	require.Equal(t, "done", status(), "a pending change is not the upgrade's")
	e.settle(id, clouddb.DatabaseError)
	require.Equal(t, clouddb.DatabaseError, e.storedDatabase(id).Status)
	require.Equal(t, "done", status(), "nor is a failed one")
	update(0.4)
	e.setActive(id)
	e.settle(id, clouddb.DatabaseError) // the server failed later, supervised
	require.Equal(t, "done", status())

	// A failed upgrade stays failed through a later failure, and a change retries it.
	update(0.5)
	e.setActive(id)
	upgrade("7.4")
	require.Equal(t, "in-progress", status())
	e.settle(id, clouddb.DatabaseError)
	require.Equal(t, "failed", status())
	e.settle(id, clouddb.DatabaseError)
	require.Equal(t, "failed", status())
	upgrade("7.4") // asked again: the failed upgrade came from 7.2, which serves the data
	require.Equal(t, "in-progress", status())
	require.Equal(t, "7.2", e.storedDatabase(id).State.Upgrade.From)
	e.settle(id, clouddb.DatabaseError)
	require.Equal(t, "failed", status())
	update(0.6)
	require.Equal(t, "in-progress", status(), "the change runs 7.4 again")
	e.setActive(id)
	require.Equal(t, "done", status())
	u := e.storedDatabase(id).State.Upgrade
	require.Equal(t, "7.2", u.From)
	require.Equal(t, "7.4", u.Target)
}

// pricingOf checks a completed dry run: no resourceId, and one Shards line per database.
func pricingOf(t *testing.T, e *env, tk *client.Task, names ...string) {
	t.Helper()
	require.Equal(t, client.TaskCompleted, tk.Status)
	require.NotNil(t, tk.Response, "a completed task carries a response object")
	require.Nil(t, tk.Response.ResourceID, "a dry run creates nothing")
	raw := e.rawTask(tk.ID)
	resp := raw["response"].(map[string]any)
	require.NotContains(t, resp, "resourceId")
	pricing, err := tk.DryRunPricing()
	require.NoError(t, err)
	var want []client.Pricing
	for _, n := range names {
		want = append(want, client.Pricing{DatabaseName: n, Type: "Shards", TypeDetails: "standard", Quantity: 1,
			QuantityMeasurement: "shards", PricePerUnit: 0, PriceCurrency: "USD", PricePeriod: "hour"})
	}
	require.Equal(t, want, pricing)
}

func TestDryRunDatabaseCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeVersions)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("dry")
	sub := e.subscription(subID)
	before := e.counts(e.mainAccount)
	list, err := e.main.AllDatabases(ctx, subID)
	require.NoError(t, err)

	// 8 GB would resize the subscription (capacity 2 GB) if it were real.
	tk, err := e.main.Wait(ctx)(e.main.CreateDatabase(ctx, subID, client.CreateDatabase{DryRun: client.Ptr(true), Name: client.Ptr("dry"),
		MemoryLimitInGB: client.Ptr(8.0), Password: client.Ptr("pw-1234"), RedisVersion: client.Ptr("7.4")}))
	require.NoError(t, err)
	pricingOf(t, e, tk, "dry")

	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+1, after.tasks)
	require.Equal(t, before.databases, after.databases)
	require.Equal(t, before.logs, after.logs, "no log entry")
	again, err := e.main.AllDatabases(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, list, again)
	require.Equal(t, sub, e.subscription(subID), "no status, capacity or generation change")

	// The same checks as a real create: each failure fails the task.
	valid := func(edit func(*client.CreateDatabase)) client.CreateDatabase {
		req := client.CreateDatabase{DryRun: client.Ptr(true), Name: client.Ptr("x"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-1234")}
		edit(&req)
		return req
	}
	for _, c := range []struct {
		typ, status string
		req         client.CreateDatabase
	}{
		{"DATABASE_INVALID_NAME", "400 BAD_REQUEST", valid(func(r *client.CreateDatabase) { r.Name = client.Ptr("bad name") })},
		{"DATABASE_NAME_ALREADY_EXISTS", "409 CONFLICT", valid(func(r *client.CreateDatabase) { r.Name = client.Ptr("db") })},
		{"DATABASE_REDIS_VERSION_IS_NOT_SUPPORTED", "400 BAD_REQUEST", valid(func(r *client.CreateDatabase) { r.RedisVersion = client.Ptr("6.2") })},
		{"DATABASE_PASSWORD_REQUIRED", "400 BAD_REQUEST", valid(func(r *client.CreateDatabase) { r.Password = nil })},
		{"INVALID_FIELD", "400 BAD_REQUEST", valid(func(r *client.CreateDatabase) { r.SourceIP = []string{"10.0.0.0/33"} })},
	} {
		tk, err := e.main.CreateDatabase(ctx, subID, c.req)
		requireTaskFailsWith(t, e.main, tk, err, c.typ, c.status)
	}
	require.Equal(t, before.databases, e.counts(e.mainAccount).databases)

	// dryRun false is a real create.
	id := e.newDatabase(subID, client.CreateDatabase{DryRun: client.Ptr(false), Name: client.Ptr("real")})
	require.False(t, e.storedDatabase(id).Spec.DryRun)
}

func TestDryRunDatabaseUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeVersions)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("dryu")
	e.setActive(dbID)
	sub := e.subscription(subID)
	db := e.storedDatabase(dbID)
	before := e.counts(e.mainAccount)

	tk, err := e.main.Wait(ctx)(e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{DryRun: client.Ptr(true),
		Name: client.Ptr("renamed"), MemoryLimitInGB: client.Ptr(6.0), Password: client.Ptr("new-pass-1"), SourceIP: []string{"10.0.0.0/8"}}))
	require.NoError(t, err)
	pricingOf(t, e, tk, "renamed") // the database as the update would make it
	require.Equal(t, db, e.storedDatabase(dbID), "the database is untouched: spec, password, status, generation")
	require.Equal(t, sub, e.subscription(subID), "the subscription is not resized")
	after := e.counts(e.mainAccount)
	require.Equal(t, before.logs, after.logs)

	tk, err = e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{DryRun: client.Ptr(true), DataEvictionPolicy: client.Ptr("sometimes")})
	requireTaskFailsWith(t, e.main, tk, err, "INVALID_FIELD", "400 BAD_REQUEST")
	require.Equal(t, db, e.storedDatabase(dbID))

	// Without dryRun the same update happens.
	tk, err = e.main.Wait(ctx)(e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{Name: client.Ptr("renamed")}))
	require.NoError(t, err)
	require.Equal(t, dbID, tk.ResourceID())
	require.Equal(t, "renamed", e.storedDatabase(dbID).Spec.Name)
}

func TestDryRunSubscriptionCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeVersions)
	ctx := testCtx(t)
	before := e.counts(e.mainAccount)
	body := e.subscriptionBody("dry", e.mainPM, 3, 0.5)
	body.DryRun = client.Ptr(true)
	body.RedisVersion = client.Ptr("latest")
	tk, err := e.main.Wait(ctx)(e.main.CreateSubscription(ctx, body))
	require.NoError(t, err)
	pricingOf(t, e, tk, "db", "db-2", "db-3")
	after := e.counts(e.mainAccount)
	require.Equal(t, counts{tasks: before.tasks + 1, cloudAccounts: before.cloudAccounts}, after, "no subscription, database or log entry")
	list, err := e.main.ListSubscriptions(ctx)
	require.NoError(t, err)
	require.Empty(t, list.Subscriptions)

	for typ, edit := range map[string]func(*client.CreateSubscription){
		"SUBSCRIPTION_REDIS_VERSION_INVALID_VALUE": func(b *client.CreateSubscription) { b.RedisVersion = client.Ptr("6.2") },
		"SUBSCRIPTION_PI_NOT_FOUND":                func(b *client.CreateSubscription) { b.PaymentMethodID = client.Ptr(999999) },
		"DATABASE_INVALID_NAME":                    func(b *client.CreateSubscription) { b.Databases[0].Name = client.Ptr("bad name") },
	} {
		b := e.subscriptionBody("dry", e.mainPM, 1, 0.5)
		b.DryRun = client.Ptr(true)
		edit(&b)
		tk, err := e.main.CreateSubscription(ctx, b)
		requireTaskFailsWith(t, e.main, tk, err, typ, "400 BAD_REQUEST")
	}
	require.Zero(t, e.counts(e.mainAccount).subscriptions)
}

func TestSourceIP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, planDB := e.activeSubscription("src")
	plan, err := e.main.GetDatabase(ctx, subID, planDB)
	require.NoError(t, err)
	require.Equal(t, []string{"0.0.0.0/0"}, plan.Security.SourceIPs)
	require.Equal(t, []string{"0.0.0.0/0"}, e.storedDatabase(planDB).Spec.SourceIPs, "the default is stored")

	given := []string{"192.168.1.0/24", "10.1.2.3/32", "2001:db8::/32"}
	id := e.newDatabase(subID, client.CreateDatabase{Name: client.Ptr("given"), SourceIP: given})
	got, err := e.main.GetDatabase(ctx, subID, id)
	require.NoError(t, err)
	require.Equal(t, given, got.Security.SourceIPs, "exactly as sent, in order")
	id2 := e.newDatabase(subID, client.CreateDatabase{Name: client.Ptr("dflt")})
	got, err = e.main.GetDatabase(ctx, subID, id2)
	require.NoError(t, err)
	require.Equal(t, []string{"0.0.0.0/0"}, got.Security.SourceIPs)

	// An update stores the list as sent.
	_, err = e.main.Wait(ctx)(e.main.UpdateDatabase(ctx, subID, id2, client.UpdateDatabase{SourceIP: []string{"172.16.5.0/24"}}))
	require.NoError(t, err)
	got, err = e.main.GetDatabase(ctx, subID, id2)
	require.NoError(t, err)
	require.Equal(t, []string{"172.16.5.0/24"}, got.Security.SourceIPs)

	// At most 32 entries, each a CIDR.
	var many []string
	for i := range 33 {
		many = append(many, fmt.Sprintf("10.0.%d.0/24", i))
	}
	tk, err := e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("many"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-1234"), SourceIP: many})
	te := requireTaskFailsWith(t, e.main, tk, err, "INVALID_FIELD", "400 BAD_REQUEST")
	require.Equal(t, "database: sourceIp may hold at most 32 elements, got 33", te.Description)
	id3 := e.newDatabase(subID, client.CreateDatabase{Name: client.Ptr("max"), SourceIP: many[:32]})
	require.Len(t, e.storedDatabase(id3).Spec.SourceIPs, 32)
	tk, err = e.main.UpdateDatabase(ctx, subID, id2, client.UpdateDatabase{SourceIP: many})
	requireTaskFailsWith(t, e.main, tk, err, "INVALID_FIELD", "400 BAD_REQUEST")
	tk, err = e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("cidr"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-1234"), SourceIP: []string{"10.0.0.1"}})
	te = requireTaskFailsWith(t, e.main, tk, err, "INVALID_FIELD", "400 BAD_REQUEST")
	require.Contains(t, te.Description, `sourceIp[0] "10.0.0.1" is not a CIDR block`)

	// A subscription that blocks public access: the private ranges.
	private := []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"}
	body := e.subscriptionBody("private", e.mainPM, 1, 0.5)
	body.PublicEndpointAccess = client.Ptr(false)
	tk, err = e.main.Wait(ctx)(e.main.CreateSubscription(ctx, body))
	require.NoError(t, err)
	privSub := tk.ResourceID()
	e.activate(privSub)
	dbs, err := e.main.AllDatabases(ctx, privSub)
	require.NoError(t, err)
	require.Equal(t, private, dbs[0].Security.SourceIPs)
	id4 := e.newDatabase(privSub, client.CreateDatabase{Name: client.Ptr("later")})
	got, err = e.main.GetDatabase(ctx, privSub, id4)
	require.NoError(t, err)
	require.Equal(t, private, got.Security.SourceIPs)
	id5 := e.newDatabase(privSub, client.CreateDatabase{Name: client.Ptr("own"), SourceIP: []string{"0.0.0.0/0"}})
	got, err = e.main.GetDatabase(ctx, privSub, id5)
	require.NoError(t, err)
	require.Equal(t, []string{"0.0.0.0/0"}, got.Security.SourceIPs, "what is sent is kept")
}
