package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// TestWalkthrough is the README's walk-through: a subscription with one database, the task
// polled to completion, the subscription polled until active, the endpoint and password
// read from the database, and a real connection to it.
func TestWalkthrough(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)

	resp, err := http.Get("http://" + s.m.Addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	pm := s.paymentMethod(ctx)
	task, err := s.c.CreateSubscription(ctx, subscriptionBody(pm, "demo", planDB("cache", 1)))
	require.NoError(t, err)
	require.Equal(t, "received", task.Status)
	done, err := s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, "processing-completed", done.Status)
	subID := done.ResourceID()
	require.Positive(t, subID)

	sub, err := s.c.WaitForSubscriptionStatus(ctx, subID, "active")
	require.NoError(t, err)
	require.Equal(t, "demo", sub.Name)
	require.Equal(t, 1, sub.NumberOfDatabases)

	dbs, err := s.c.AllDatabases(ctx, subID)
	require.NoError(t, err)
	require.Len(t, dbs, 1)
	db := dbs[0]
	require.Equal(t, "cache", db.Name)
	require.Equal(t, "active", db.Status)
	require.Equal(t, db.PublicEndpoint, db.PrivateEndpoint)
	require.True(t, strings.HasPrefix(db.PublicEndpoint, "127.0.0.1:"), db.PublicEndpoint)
	require.NotEmpty(t, db.Security.Password, "a creation-plan database gets a generated password")

	r := redisOf(t, &db)
	require.NoError(t, r.Set(ctx, "greeting", "hello", 0).Err())
	require.Equal(t, "hello", r.Get(ctx, "greeting").Val())
	maxmem, err := internalRedis(t, filepath.Join(s.dir, "databases"), db.ID, db.PublicEndpoint).ConfigGet(ctx, "maxmemory").Result()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(1<<30), maxmem["maxmemory"], "datasetSizeInGb sizes the server")

	// A wrong password is refused by the server itself.
	wrong := *db.Security
	wrong.Password = "not-it"
	bad := redisOf(t, &client.Database{PublicEndpoint: db.PublicEndpoint, Security: &wrong})
	require.Error(t, bad.Ping(ctx).Err())

	// A database added with POST …/databases uses the password it was given.
	dbID := s.createDatabase(ctx, subID, client.CreateDatabase{
		Name: client.Ptr("sessions"), MemoryLimitInGB: client.Ptr(0.5), Password: client.Ptr("s3cret-Pass"),
		DataEvictionPolicy: client.Ptr("allkeys-lru"),
	})
	got, err := s.c.WaitForDatabaseStatus(ctx, subID, dbID, "active")
	require.NoError(t, err)
	require.Equal(t, "s3cret-Pass", got.Security.Password)
	require.NotEqual(t, db.PublicEndpoint, got.PublicEndpoint, "each database has its own port")
	r2 := redisOf(t, got)
	require.NoError(t, r2.Ping(ctx).Err())
	policy, err := internalRedis(t, filepath.Join(s.dir, "databases"), dbID, got.PublicEndpoint).ConfigGet(ctx, "maxmemory-policy").Result()
	require.NoError(t, err)
	require.Equal(t, "allkeys-lru", policy["maxmemory-policy"])

	// Every change is in the system log, newest first.
	logs, err := s.c.Logs(ctx, client.LogQuery{})
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	var descs []string
	for i, e := range logs {
		if i > 0 {
			require.Greater(t, logs[i-1].ID, e.ID, "newest first")
		}
		descs = append(descs, e.Description)
	}
	joined := strings.Join(descs, "\n")
	require.Contains(t, joined, `Subscription "demo"`)
	require.Contains(t, joined, `Database "sessions"`)
}

// TestUpdateAppliesToLiveServer changes memory limit, eviction policy and password of a
// running database: the same server process takes them, and its data stays.
func TestUpdateAppliesToLiveServer(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, db := s.activeSubscription(ctx, "upd", 1)
	r := redisOf(t, db)
	require.NoError(t, r.Set(ctx, "k", "v", 0).Err())
	pidBefore, err := s.m.Driver.Pid(db.ID)
	require.NoError(t, err)

	task, err := s.c.UpdateDatabase(ctx, subID, db.ID, client.UpdateDatabase{
		MemoryLimitInGB:    client.Ptr(2.0),
		DataEvictionPolicy: client.Ptr("allkeys-lfu"),
		Password:           client.Ptr("new-Password-1"),
	})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	got, err := s.c.WaitForDatabaseStatus(ctx, subID, db.ID, "active")
	require.NoError(t, err)
	require.Equal(t, 2.0, got.MemoryLimitInGB)
	require.Equal(t, "allkeys-lfu", got.DataEvictionPolicy)
	require.Equal(t, "new-Password-1", got.Security.Password)

	r2 := redisOf(t, got)
	admin := internalRedis(t, filepath.Join(s.dir, "databases"), db.ID, got.PublicEndpoint)
	cfg, err := admin.ConfigGet(ctx, "maxmemory").Result()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(2<<30), cfg["maxmemory"])
	cfg, err = admin.ConfigGet(ctx, "maxmemory-policy").Result()
	require.NoError(t, err)
	require.Equal(t, "allkeys-lfu", cfg["maxmemory-policy"])
	require.Equal(t, "v", r2.Get(ctx, "k").Val(), "data survives the update")
	pidAfter, err := s.m.Driver.Pid(db.ID)
	require.NoError(t, err)
	require.Equal(t, pidBefore, pidAfter, "the update is applied to the running server, not by a restart")

	old := redisOf(t, db) // the old password
	require.Error(t, old.Ping(ctx).Err(), "the old password no longer works")
}

// TestResize: a database create that needs more than the subscription's capacity moves it
// active → pending → active; one that fits leaves it active.
func TestResize(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{delay: 700 * time.Millisecond})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "rs", 1) // capacity 1 GB

	create := func(name string) int {
		return s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr(name), DatasetSizeInGB: client.Ptr(1.0), Password: client.Ptr("pw-" + name)})
	}
	status := func() string {
		sub, err := s.c.GetSubscription(ctx, subID)
		require.NoError(t, err)
		return sub.Status
	}

	create("second") // 2 GB needed > 1 GB: resize to 2 GB
	require.Equal(t, "pending", status(), "the resize makes the subscription pending")
	_, err := s.c.WaitForSubscriptionStatus(ctx, subID, "active")
	require.NoError(t, err)

	// While it is pending, database changes in it fail.
	create("third") // 3 GB > 2 GB: resize to 4 GB
	require.Equal(t, "pending", status())
	task, err := s.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("early"), DatasetSizeInGB: client.Ptr(1.0), Password: client.Ptr("pw")})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "SUBSCRIPTION_NOT_ACTIVE", cerr.Type)
	require.Equal(t, "403 FORBIDDEN", cerr.Status)
	_, err = s.c.WaitForSubscriptionStatus(ctx, subID, "active")
	require.NoError(t, err)

	create("fourth") // 4 GB fits the 4 GB capacity: no resize
	require.Equal(t, "active", status(), "a create that fits does not resize")
	dbs, err := s.c.AllDatabases(ctx, subID)
	require.NoError(t, err)
	require.Len(t, dbs, 4)
	for _, d := range dbs {
		_, err := s.c.WaitForDatabaseStatus(ctx, subID, d.ID, "active")
		require.NoError(t, err)
	}
}

// TestNonActiveLimit: with provisioning slowed down, three subscriptions may be pending at
// once; the task of a fourth fails, and once they are active, creates work again.
func TestNonActiveLimit(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{delay: 2 * time.Second})
	ctx := testContext(t)
	pm := s.paymentMethod(ctx)
	var subs []int
	for i := range 3 {
		subs = append(subs, s.createSubscription(ctx, subscriptionBody(pm, "p"+strconv.Itoa(i), planDB("d", 0.1))))
	}
	for _, id := range subs {
		sub, err := s.c.GetSubscription(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "pending", sub.Status)
	}
	task, err := s.c.CreateSubscription(ctx, subscriptionBody(pm, "fourth", planDB("d", 0.1)))
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "SUBSCRIPTION_MAX_PENDING_REACHED", cerr.Type)
	list, err := s.c.ListSubscriptions(ctx)
	require.NoError(t, err)
	require.Len(t, list.Subscriptions, 3, "the failed task created nothing")

	for _, id := range subs {
		_, err := s.c.WaitForSubscriptionStatus(ctx, id, "active")
		require.NoError(t, err)
	}
	s.createSubscription(ctx, subscriptionBody(pm, "later", planDB("d", 0.1)))
}

// TestDeleteFlow: a deleted database answers 404 at once and its server and data go; a
// deleted subscription reads deleting, then 404.
func TestDeleteFlow(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, db := s.activeSubscription(ctx, "del", 0.5)
	port := portOf(t, db.PublicEndpoint)
	require.True(t, listening(port))

	// A subscription with databases cannot be deleted.
	task, err := s.c.DeleteSubscription(ctx, subID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "SUBSCRIPTION_HAS_DATABASES", cerr.Type)

	task, err = s.c.DeleteDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	_, err = s.c.GetDatabase(ctx, subID, db.ID)
	require.True(t, client.IsNotFound(err), "a deleted database is gone at once: %v", err)
	eventually(t, 10*time.Second, "server stopped", func() bool { return !listening(port) })
	eventually(t, 10*time.Second, "data removed", func() bool {
		_, statErr := os.Stat(filepath.Join(s.dir, "databases", strconv.Itoa(db.ID)))
		return os.IsNotExist(statErr)
	})

	task, err = s.c.DeleteSubscription(ctx, subID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	require.NoError(t, s.c.WaitForSubscriptionGone(ctx, subID))
}

// TestDeletingStateIsVisible: with a provisioning delay, a deleted subscription reads
// deleting before it answers 404, as Terraform's waiter expects.
func TestDeletingStateIsVisible(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{delay: 500 * time.Millisecond})
	ctx := testContext(t)
	subID, db := s.activeSubscription(ctx, "dv", 0.1)
	task, err := s.c.DeleteDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	eventually(t, 10*time.Second, "database row gone", func() bool {
		list, listErr := s.c.ListDatabases(ctx, subID, 100, 0)
		require.NoError(t, listErr)
		return len(list.Subscription[0].Databases) == 0
	})
	task, err = s.c.DeleteSubscription(ctx, subID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	sub, err := s.c.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, "deleting", sub.Status)
	require.NoError(t, s.c.WaitForSubscriptionGone(ctx, subID))
}

// TestDatabaseErrorState: a database whose server cannot start (its port was taken after
// it was chosen) ends in error with details.
func TestDatabaseErrorState(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{delay: time.Second})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "err", 0.1)
	dbID := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("doomed"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})
	db, err := s.c.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, "pending", db.Status)
	ln, err := net.Listen("tcp", db.PublicEndpoint) // another program takes the port
	require.NoError(t, err)
	defer ln.Close()
	got, err := s.c.WaitForDatabaseStatus(ctx, subID, dbID, "error")
	require.NoError(t, err)
	require.Contains(t, got.StatusDetail, strconv.Itoa(portOf(t, db.PublicEndpoint)), "the detail names the cause")
	logs, err := s.c.Logs(ctx, client.LogQuery{})
	require.NoError(t, err)
	require.Contains(t, logs[0].Description+logs[1].Description, "failed to start")
}

// TestRestartBringsDatabasesBack: a graceful stop persists each database as configured;
// the next start brings every one back on its port with its password and data.
func TestRestartBringsDatabasesBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ports := portRange()
	s := startService(t, dir, options{ports: ports})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "rst", 0.1)
	persisted := map[string]string{"aof": "aof-every-1-second", "snap": "snapshot-every-1-hour", "none": "none"}
	ids := map[string]int{}
	for name, p := range persisted {
		ids[name] = s.createDatabase(ctx, subID, client.CreateDatabase{
			Name: client.Ptr(name), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-" + name), DataPersistence: client.Ptr(p),
		})
	}
	before := map[string]*client.Database{}
	for name, id := range ids {
		db, err := s.c.WaitForDatabaseStatus(ctx, subID, id, "active")
		require.NoError(t, err)
		require.NoError(t, redisOf(t, db).Set(ctx, "key", "value-"+name, 0).Err())
		before[name] = db
	}
	s.stop()
	for name, db := range before {
		require.False(t, listening(portOf(t, db.PublicEndpoint)), "%s: servers stop with clouddb", name)
	}

	s2 := startService(t, dir, options{ports: ports})
	for name, id := range ids {
		db, err := s2.c.WaitForDatabaseStatus(ctx, subID, id, "active")
		require.NoError(t, err)
		require.Equal(t, before[name].PublicEndpoint, db.PublicEndpoint, "same port")
		r := redisOf(t, db)
		eventually(t, 15*time.Second, name+" answers again", func() bool { return r.Ping(ctx).Err() == nil })
		if name == "none" {
			require.Zero(t, r.Exists(ctx, "key").Val(), "persistence none keeps no data")
			continue
		}
		require.Equal(t, "value-"+name, r.Get(ctx, "key").Val(), "%s: data survives the restart", name)
	}
}

// TestCreationPlanWithQuantity: the databases of a subscription body are really created,
// quantity times, each a server of its own.
func TestCreationPlanWithQuantity(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	plan := planDB("shard", 0.1)
	plan.Quantity = client.Ptr(3)
	subID := s.createSubscription(ctx, subscriptionBody(s.paymentMethod(ctx), "q", plan, planDB("solo", 0.2)))
	_, err := s.c.WaitForSubscriptionStatus(ctx, subID, "active")
	require.NoError(t, err)
	dbs, err := s.c.AllDatabases(ctx, subID)
	require.NoError(t, err)
	var names []string
	for _, d := range dbs {
		names = append(names, d.Name)
		require.Equal(t, "active", d.Status)
		require.NoError(t, redisOf(t, &d).Ping(ctx).Err())
	}
	require.ElementsMatch(t, []string{"shard", "shard-2", "shard-3", "solo"}, names)
}

// TestLogsEveryChange: every change made through the API is in GET /logs, with its
// resource: updates, deletes and tag changes as well as creates.
func TestLogsEveryChange(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, plan := s.activeSubscription(ctx, "logged", 0.1)
	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("second"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})

	wait := func(tk *client.Task, err error) {
		t.Helper()
		require.NoError(t, err)
		_, err = s.c.WaitForTask(ctx, tk.ID)
		require.NoError(t, err)
	}
	latest := func() client.LogEntry {
		t.Helper()
		logs, err := s.c.Logs(ctx, client.LogQuery{Limit: 1})
		require.NoError(t, err)
		require.Len(t, logs, 1)
		return logs[0]
	}
	// step checks that do made exactly one entry by the API (the service's own entries,
	// such as a database turning active, come besides).
	step := func(what, typ string, id int, do func()) {
		t.Helper()
		before := latest()
		do()
		logs, err := s.c.Logs(ctx, client.LogQuery{Limit: 100})
		require.NoError(t, err)
		var byAPI []client.LogEntry
		for _, e := range logs {
			if e.ID > before.ID && e.Originator == "API" {
				byAPI = append(byAPI, e)
			}
		}
		require.Len(t, byAPI, 1, "%s: entries by the API", what)
		require.Equal(t, typ, byAPI[0].Type, what)
		require.Equal(t, id, byAPI[0].ResourceID, what)
		t.Logf("%s: %q", what, byAPI[0].Description)
	}

	step("database update", "Database", db.ID, func() {
		wait(s.c.UpdateDatabase(ctx, subID, db.ID, client.UpdateDatabase{DataEvictionPolicy: client.Ptr("allkeys-lru")}))
		_, err := s.c.WaitForDatabaseStatus(ctx, subID, db.ID, "active")
		require.NoError(t, err)
	})
	step("database tags", "Database", db.ID, func() {
		_, err := s.c.PutDatabaseTags(ctx, subID, db.ID, []client.Tag{{Key: "team", Value: "a"}})
		require.NoError(t, err)
	})
	step("database delete", "Database", db.ID, func() { wait(s.c.DeleteDatabase(ctx, subID, db.ID)) })
	step("subscription update", "Subscription", subID, func() {
		wait(s.c.UpdateSubscription(ctx, subID, client.UpdateSubscription{Name: client.Ptr("renamed")}))
		_, err := s.c.WaitForSubscriptionStatus(ctx, subID, "active")
		require.NoError(t, err)
	})
	wait(s.c.DeleteDatabase(ctx, subID, plan.ID))
	step("subscription delete", "Subscription", subID, func() { wait(s.c.DeleteSubscription(ctx, subID)) })

	tk, err := s.c.CreateCloudAccount(ctx, client.CreateCloudAccount{Name: client.Ptr("ca"), Provider: client.Ptr("AWS"), AccessKeyID: client.Ptr("AKIA1"),
		AccessSecretKey: client.Ptr("secret"), ConsoleUsername: client.Ptr("u"), ConsolePassword: client.Ptr("p"), SignInLoginURL: client.Ptr("https://example.com")})
	require.NoError(t, err)
	done, err := s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	caID := done.ResourceID()
	require.Eventually(t, func() bool {
		ca, err := s.c.GetCloudAccount(ctx, caID)
		return err == nil && ca.Status == "active"
	}, 10*time.Second, 20*time.Millisecond)
	step("cloud account update", "CloudAccount", caID, func() {
		wait(s.c.UpdateCloudAccount(ctx, caID, client.UpdateCloudAccount{Name: client.Ptr("ca-renamed"), AccessKeyID: client.Ptr("AKIA2"),
			AccessSecretKey: client.Ptr("secret2"), ConsoleUsername: client.Ptr("u"), ConsolePassword: client.Ptr("p")}))
	})
	require.Eventually(t, func() bool {
		ca, err := s.c.GetCloudAccount(ctx, caID)
		return err == nil && ca.Status == "active"
	}, 10*time.Second, 20*time.Millisecond)
	step("cloud account delete", "CloudAccount", caID, func() { wait(s.c.DeleteCloudAccount(ctx, caID)) })
}

// TestProvisioningInParallel: the databases of a subscription's creation plan are
// provisioned side by side, not one after another: with each step held for the
// provisioning delay, they turn active within one delay of each other (in a row they
// would be a delay apart each).
func TestProvisioningInParallel(t *testing.T) {
	t.Parallel()
	const delay = time.Second
	s := startService(t, t.TempDir(), options{delay: delay})
	ctx := testContext(t)
	db := planDB("side", 0.1)
	db.Quantity = client.Ptr(4)
	sub := s.createSubscription(ctx, subscriptionBody(s.paymentMethod(ctx), "parallel", db))
	_, err := s.c.WaitForSubscriptionStatus(ctx, sub, "active")
	require.NoError(t, err)
	dbs, err := s.c.AllDatabases(ctx, sub)
	require.NoError(t, err)
	require.Len(t, dbs, 4)
	var first, last time.Time
	for _, d := range dbs {
		got, err := s.c.WaitForDatabaseStatus(ctx, sub, d.ID, "active")
		require.NoError(t, err)
		require.NotNil(t, got.ActivatedOn)
		at := *got.ActivatedOn
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	t.Logf("four databases active within %s of each other", last.Sub(first))
	require.Less(t, last.Sub(first), delay, "provisioned one after another")
}

// TestTerraformSequence: the calls the official Terraform provider makes over a
// resource's life, against the real service: create a subscription and wait for it,
// read it with its maintenance windows and pricing (the provider reads both on every
// subscription read), run the update step of its create (PUT the subscription, wait,
// PUT maintenance windows, read), set the windows back to automatic, create, update and
// tag a database and wait for each, then delete the database and the subscription and
// wait until they are gone.
func TestTerraformSequence(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	pm := s.paymentMethod(ctx)
	sub := s.createSubscription(ctx, subscriptionBody(pm, "tf", planDB("tf-plan", 0.1)))
	read := func() *client.MaintenanceWindows {
		t.Helper()
		got, err := s.c.WaitForSubscriptionStatus(ctx, sub, "active")
		require.NoError(t, err)
		require.Equal(t, sub, got.ID)
		mw, err := s.c.GetMaintenanceWindows(ctx, sub)
		require.NoError(t, err)
		_, err = s.c.GetPricing(ctx, sub)
		require.NoError(t, err)
		return mw
	}
	require.Equal(t, &client.MaintenanceWindows{Mode: "automatic"}, read())

	// The update step of the provider's create, with maintenance_windows configured.
	tk, err := s.c.UpdateSubscription(ctx, sub, client.UpdateSubscription{Name: client.Ptr("tf"), PaymentMethodID: client.Ptr(pm),
		PublicEndpointAccess: client.Ptr(true)})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	_, err = s.c.WaitForSubscriptionStatus(ctx, sub, "active")
	require.NoError(t, err)
	tk, err = s.c.UpdateMaintenanceWindows(ctx, sub, client.UpdateMaintenanceWindows{Mode: client.Ptr("manual"), Windows: []client.UpdateMaintenanceWindow{
		{StartHour: client.Ptr(22), DurationInHours: client.Ptr(8), Days: []string{"Monday", "Thursday"}},
		{StartHour: client.Ptr(0), DurationInHours: client.Ptr(4), Days: []string{"Saturday"}},
	}})
	require.NoError(t, err)
	require.Equal(t, "subscriptionMaintenanceWindowsUpdateRequest", tk.CommandType)
	done, err := s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	require.Equal(t, sub, done.ResourceID())
	want := &client.MaintenanceWindows{Mode: "manual", Windows: []client.MaintenanceWindow{
		{StartHour: 22, DurationInHours: 8, Days: []string{"Monday", "Thursday"}},
		{StartHour: 0, DurationInHours: 4, Days: []string{"Saturday"}},
	}}
	require.Equal(t, want, read())
	require.Equal(t, want, read(), "a second plan sees no change")
	// The windows removed from the configuration: back to automatic.
	_, err = s.c.Wait(ctx)(s.c.UpdateMaintenanceWindows(ctx, sub, client.UpdateMaintenanceWindows{Mode: client.Ptr("automatic")}))
	require.NoError(t, err)
	require.Equal(t, &client.MaintenanceWindows{Mode: "automatic"}, read())

	db := s.addDatabase(ctx, sub, client.CreateDatabase{Name: client.Ptr("tf-db"), DatasetSizeInGB: client.Ptr(0.1), Password: client.Ptr("tf-pass-1"),
		DataPersistence: client.Ptr("none"), DataEvictionPolicy: client.Ptr("volatile-lru")})
	read()
	tk, err = s.c.UpdateDatabase(ctx, sub, db.ID, client.UpdateDatabase{Password: client.Ptr("tf-pass-2"), DataEvictionPolicy: client.Ptr("allkeys-lru"),
		ReplicaOf: []string{}})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	got, err := s.c.WaitForDatabaseStatus(ctx, sub, db.ID, "active")
	require.NoError(t, err)
	require.Equal(t, "allkeys-lru", got.DataEvictionPolicy)
	require.NoError(t, redisOf(t, got).Ping(ctx).Err(), "the new password works")
	tags, err := s.c.PutDatabaseTags(ctx, sub, db.ID, []client.Tag{{Key: "env", Value: "ci"}})
	require.NoError(t, err)
	require.Equal(t, []client.Tag{{Key: "env", Value: "ci"}}, tags)

	dbs, err := s.c.AllDatabases(ctx, sub)
	require.NoError(t, err)
	for _, d := range dbs {
		delTask, derr := s.c.DeleteDatabase(ctx, sub, d.ID)
		require.NoError(t, derr)
		_, derr = s.c.WaitForTask(ctx, delTask.ID)
		require.NoError(t, derr)
		_, derr = s.c.GetDatabase(ctx, sub, d.ID)
		require.True(t, client.IsNotFound(derr), "database %d is gone: %v", d.ID, derr)
		eventually(t, 10*time.Second, "its server stops", func() bool { return !listening(portOf(t, d.PublicEndpoint)) })
	}
	read()
	tk, err = s.c.DeleteSubscription(ctx, sub)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	require.NoError(t, s.c.WaitForSubscriptionGone(ctx, sub))
	list, err := s.c.ListSubscriptions(ctx)
	require.NoError(t, err)
	require.Empty(t, list.Subscriptions)
}

// TestAdvertiseHost: the databases bind --advertise-host and their endpoints name it; a
// client reaches them there, and not on another loopback address.
func TestAdvertiseHost(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{advertiseHost: "127.0.0.2"})
	ctx := testContext(t)
	_, db := s.activeSubscription(ctx, "adv", 0.1)
	host, port, err := net.SplitHostPort(db.PublicEndpoint)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.2", host)
	require.Equal(t, db.PublicEndpoint, db.PrivateEndpoint)
	require.NoError(t, redisOf(t, db).Ping(ctx).Err())
	_, err = net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second)
	require.Error(t, err, "the server listens on the advertised address only")
}
