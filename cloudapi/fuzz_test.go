package cloudapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/blob"
	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
	"clouddb/driver/local"
	"clouddb/sqlite"
	"clouddb/task"
)

// The fuzz targets feed arbitrary request bodies, path segments and query parameters to
// the real server (real SQLite store, real task engine) over HTTP and check what every
// answer must satisfy:
//   - the status is below 500;
//   - an error answer is a JSON {"error": {type, status, description}} with the HTTP
//     status, and it changed nothing: no task, no log entry, no row written;
//   - a 2xx that enqueued a task made exactly that one task, and the engine takes it to a
//     final state: processing-completed, or processing-error with a response.error that
//     is not GENERAL_ERROR (an internal error is a bug).
//
// The seed corpus is in testdata/fuzz/<target>/ and runs with `go test` (and `make test`);
// `make fuzz` fuzzes each target. Each target (and each fuzzing worker) uses one API,
// made by newFuzzEnv; after an input that changed something the state is put back, so
// every input meets the same resources.

// fuzzEnv is an env made once per fuzz target, with the resources the inputs address.
type fuzzEnv struct {
	*env
	ready bool

	// The main account's subscription (active, with one database) and cloud account,
	// and the other account's; a finished task of each.
	sub, db, ca                int
	otherSub, otherDB, otherCA int
	task, otherTask            string

	// baseline is the state every input starts from.
	baseline fuzzState
}

// newFuzzEnv is newEnv for a fuzz target: newEnv binds the API's life to the *testing.T
// it is given, which for a fuzz input ends with the input. The components are the same:
// a SQLite store in a temporary directory, a running task engine (no reconciler) and the
// HTTP server. The accounts and resources are made by the first input (see use), through
// env's own helpers.
func newFuzzEnv(f *testing.F) *fuzzEnv {
	f.Helper()
	boundMinimization(f)
	store, err := sqlite.Open(filepath.Join(f.TempDir(), "clouddb.db"))
	require.NoError(f, err)
	e := &env{store: store}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	low := 21000 + int(portBase.Add(1)%40)*200
	// Unlike newEnv's, this engine has a data plane, so that a backup or an import task
	// ends as it would in the service (no database server runs: they fail with their
	// cause). The periodic backups are checked once, at the start, when no database
	// exists: a fuzzed backup path is never written to.
	drv, err := local.New(local.Config{Dir: filepath.Join(f.TempDir(), "databases"), Host: "127.0.0.1", Logger: quiet})
	require.NoError(f, err)
	engine := &task.Engine{
		Store:  store,
		Ports:  &task.Ports{Low: low, High: low + 199, Host: "127.0.0.1"},
		Driver: drv,
		// A fuzzed backup path writes (at most a directory, as no server runs to
		// snapshot) only under a directory of the test's, as the service's would under
		// --backup-dirs.
		Blob:         blob.Options{LocalRoots: []string{f.TempDir()}, Timeout: 2 * time.Second},
		TempDir:      f.TempDir(),
		BackupCheck:  1000 * time.Hour,
		Logger:       quiet,
		PollInterval: 20 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error // read after done is closed; f's methods are not for other goroutines
	go func() {
		defer close(done)
		runErr = engine.Run(ctx)
	}()
	api := &cloudapi.Server{Store: store, Tasks: engine, AdvertiseHost: "127.0.0.1", Logger: quiet}
	e.srv = httptest.NewServer(api.Handler())
	e.base = e.srv.URL + "/v1"
	f.Cleanup(func() {
		e.srv.Close()
		cancel()
		<-done
		require.NoError(f, runErr, "task engine")
		require.NoError(f, store.Close())
	})
	return &fuzzEnv{env: e}
}

// boundMinimization sets -fuzzminimizetime to 5s unless it was given. An execution here
// costs about a millisecond (an HTTP round trip and store transactions), and `go test
// -fuzz` stops fuzzing while it minimizes each new interesting input, for up to the
// default 60s: a short run (make fuzz FUZZTIME=60s) would spend most of its time
// minimizing.
func boundMinimization(f *testing.F) {
	given := false
	flag.Visit(func(fl *flag.Flag) { given = given || fl.Name == "test.fuzzminimizetime" })
	if !given {
		require.NoError(f, flag.Set("test.fuzzminimizetime", "5s"))
	}
}

// use points the env's helpers at the input's test and, the first time, bootstraps the
// accounts and makes the resources the inputs address.
func (fe *fuzzEnv) use(t *testing.T) {
	t.Helper()
	fe.t = t
	if fe.ready {
		return
	}
	fe.bootstrap()
	fe.main = fe.client(mainKey, mainSecret)
	fe.viewer = fe.client(viewerKey, viewerSecret)
	fe.other = fe.client(otherKey, otherSecret)
	fe.fixed = fe.client(fixedKey, fixedSecret)
	fe.free = fe.client(freeKey, freeSecret)

	fe.sub, fe.db = fe.activeSubscription("target")
	fe.ca = fe.createCloudAccount(fe.main, "target")
	fe.otherSub = fe.createSubscription(fe.other, fe.otherPM, "theirs")
	fe.activate(fe.otherSub)
	page, err := fe.other.ListDatabases(testCtx(t), fe.otherSub, 100, 0)
	require.NoError(t, err)
	fe.otherDB = page.Subscription[0].Databases[0].ID
	fe.otherCA = fe.createCloudAccount(fe.other, "theirs")
	fe.task = fe.tasks(fe.mainAccount)[0].ID
	fe.otherTask = fe.tasks(fe.otherAccount)[0].ID
	// The database is active, as after provisioning (there is no reconciler here).
	ctx := context.Background()
	require.NoError(t, fe.store.Update(ctx, func(tx clouddb.Tx) error {
		for _, id := range []int{fe.db, fe.otherDB} {
			d, err := tx.Database(ctx, 0, id)
			if err != nil {
				return err
			}
			if _, err := tx.SetDatabaseStatus(ctx, id, d.Generation, clouddb.DatabaseActive, ""); err != nil {
				return err
			}
		}
		return nil
	}))
	fe.baseline = fe.state(time.Now())
	fe.ready = true
}

// fuzzState is what an input may change: every resource row, the tasks updated since a
// moment, and the newest log entry.
type fuzzState struct {
	subs    []*clouddb.Subscription
	dbs     []*clouddb.Database
	cas     []*clouddb.CloudAccount
	rules   []*clouddb.ACLRule
	roles   []*clouddb.ACLRole
	users   []*clouddb.ACLUser
	tasks   []*clouddb.Task
	lastLog int
}

func (fe *fuzzEnv) state(since time.Time) fuzzState {
	t := fe.t
	t.Helper()
	var s fuzzState
	ctx := context.Background()
	require.NoError(t, fe.store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		if s.subs, err = tx.Subscriptions(ctx, clouddb.SubscriptionFilter{}); err != nil {
			return err
		}
		if s.dbs, _, err = tx.Databases(ctx, clouddb.DatabaseFilter{}); err != nil {
			return err
		}
		if s.cas, err = tx.CloudAccounts(ctx, clouddb.CloudAccountFilter{}); err != nil {
			return err
		}
		if s.rules, err = tx.ACLRules(ctx, 0); err != nil {
			return err
		}
		if s.roles, err = tx.ACLRoles(ctx, 0); err != nil {
			return err
		}
		if s.users, err = tx.ACLUsers(ctx, 0); err != nil {
			return err
		}
		if s.tasks, err = tx.Tasks(ctx, clouddb.TaskFilter{UpdatedSince: since}); err != nil {
			return err
		}
		logs, err := tx.LogEntries(ctx, clouddb.LogFilter{Limit: 1})
		if len(logs) > 0 {
			s.lastLog = logs[0].ID
		}
		return err
	}))
	return s
}

// newTasks returns the tasks of after that before does not have.
func newTasks(before, after fuzzState) []*clouddb.Task {
	var out []*clouddb.Task
	for _, tk := range after.tasks {
		if !slices.ContainsFunc(before.tasks, func(b *clouddb.Task) bool { return b.ID == tk.ID }) {
			out = append(out, tk)
		}
	}
	return out
}

// reset puts every resource row back as it was in the baseline: what an input made is
// deleted, what it changed is written back.
func (fe *fuzzEnv) reset() {
	t := fe.t
	t.Helper()
	ctx := context.Background()
	b := fe.baseline
	require.NoError(t, fe.store.Update(ctx, func(tx clouddb.Tx) error {
		dbs, _, err := tx.Databases(ctx, clouddb.DatabaseFilter{})
		if err != nil {
			return err
		}
		for _, d := range dbs {
			i := slices.IndexFunc(b.dbs, func(x *clouddb.Database) bool { return x.ID == d.ID })
			switch {
			case i < 0:
				err = tx.DeleteDatabase(ctx, d.ID)
			case !equalJSON(d, b.dbs[i]):
				orig := *b.dbs[i]
				err = tx.UpdateDatabase(ctx, &orig)
			}
			if err != nil {
				return err
			}
		}
		subs, err := tx.Subscriptions(ctx, clouddb.SubscriptionFilter{})
		if err != nil {
			return err
		}
		for _, s := range subs {
			i := slices.IndexFunc(b.subs, func(x *clouddb.Subscription) bool { return x.ID == s.ID })
			switch {
			case i < 0:
				err = tx.DeleteSubscription(ctx, s.ID)
			case !equalJSON(s, b.subs[i]):
				orig := *b.subs[i]
				err = tx.UpdateSubscription(ctx, &orig)
			}
			if err != nil {
				return err
			}
		}
		cas, err := tx.CloudAccounts(ctx, clouddb.CloudAccountFilter{})
		if err != nil {
			return err
		}
		for _, c := range cas {
			i := slices.IndexFunc(b.cas, func(x *clouddb.CloudAccount) bool { return x.ID == c.ID })
			switch {
			case i < 0:
				err = tx.DeleteCloudAccount(ctx, c.ID)
			case !equalJSON(c, b.cas[i]):
				orig := *b.cas[i]
				err = tx.UpdateCloudAccount(ctx, &orig)
			}
			if err != nil {
				return err
			}
		}
		return resetACL(ctx, tx, b)
	}))
}

// resetACL puts the ACL rows back as they were in the baseline b.
func resetACL(ctx context.Context, tx clouddb.Tx, b fuzzState) error {
	users, err := tx.ACLUsers(ctx, 0)
	if err != nil {
		return err
	}
	for _, u := range users {
		if i := slices.IndexFunc(b.users, func(x *clouddb.ACLUser) bool { return x.ID == u.ID }); i < 0 {
			err = tx.DeleteACLUser(ctx, u.ID)
		} else if !equalJSON(u, b.users[i]) {
			orig := *b.users[i]
			err = tx.UpdateACLUser(ctx, &orig)
		}
		if err != nil {
			return err
		}
	}
	roles, err := tx.ACLRoles(ctx, 0)
	if err != nil {
		return err
	}
	for _, r := range roles {
		if i := slices.IndexFunc(b.roles, func(x *clouddb.ACLRole) bool { return x.ID == r.ID }); i < 0 {
			err = tx.DeleteACLRole(ctx, r.ID)
		} else if !equalJSON(r, b.roles[i]) {
			orig := *b.roles[i]
			err = tx.UpdateACLRole(ctx, &orig)
		}
		if err != nil {
			return err
		}
	}
	rules, err := tx.ACLRules(ctx, 0)
	if err != nil {
		return err
	}
	for _, r := range rules {
		if r.IsDefault {
			continue
		}
		if i := slices.IndexFunc(b.rules, func(x *clouddb.ACLRule) bool { return x.ID == r.ID }); i < 0 {
			err = tx.DeleteACLRule(ctx, r.ID)
		} else if !equalJSON(r, b.rules[i]) {
			orig := *b.rules[i]
			err = tx.UpdateACLRule(ctx, &orig)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// equalJSON compares two rows but for UpdatedAt, which a write-back moves.
func equalJSON(a, b any) bool {
	strip := func(v any) string {
		m := map[string]any{}
		raw, _ := json.Marshal(v)
		if json.Unmarshal(raw, &m) != nil {
			return string(raw) // not an object: compared whole
		}
		delete(m, "UpdatedAt")
		out, _ := json.Marshal(m)
		return string(out)
	}
	return strip(a) == strip(b)
}

// send makes one request with the main account's owner key. It reports false when the
// URL is not one an HTTP client can send.
func (fe *fuzzEnv) send(method, rawURL string, body []byte) (response, bool) {
	t := fe.t
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host != strings.TrimPrefix(fe.srv.URL, "http://") {
		return response{}, false
	}
	// The client escapes the path but sends the query as it is: a space or a control
	// character there makes a request line that net/http itself refuses, before any
	// handler (with a plain-text 400).
	if strings.ContainsFunc(u.RawQuery, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return response{}, false
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return response{}, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", mainKey)
	req.Header.Set("x-api-secret-key", mainSecret)
	resp, err := fe.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{resp.StatusCode, resp.Header, b}, true
}

// check sends the request and checks the answer and its effects; then it puts the state
// back.
func (fe *fuzzEnv) check(t *testing.T, method, path string, body []byte) {
	t.Helper()
	fe.use(t)
	// Tasks updated since a second ago: the wall clock may step back by a few
	// microseconds, and a task of the previous input may be among them.
	mark := time.Now().UTC().Add(-time.Second)
	before := fe.state(mark)
	for _, tk := range before.tasks {
		require.True(t, tk.Status.Final(), "task %s of an earlier input is still %s", tk.ID, tk.Status)
	}
	r, ok := fe.send(method, fe.srv.URL+path, body)
	if !ok {
		return
	}
	after := fe.state(mark)
	switch {
	case r.status >= 200 && r.status < 300:
		fe.checkSuccess(method, path, r, mark, before, after)
	case r.status >= 400 && r.status < 500:
		if method != http.MethodHead {
			e := requireError(t, r, r.status, "")
			require.NotEqual(t, clouddb.ErrTypeGeneral, e.Error.Type, "body: %s", r.body)
		}
		require.Empty(t, newTasks(before, after), "%s %s answered %d but enqueued a task", method, path, r.status)
		require.Equal(t, before, after, "%s %s answered %d but changed the state", method, path, r.status)
	default:
		t.Fatalf("%s %s answered %d: %s", method, path, r.status, r.body)
	}
}

// checkSuccess checks a 2xx: a request made at most one task, which the engine takes to
// a final state that is not an internal error (a write answers with it; a GET or HEAD
// may only make a status task, as GET …/backup and GET …/import do); any other read
// changed nothing; a tags update wrote what it answered.
func (fe *fuzzEnv) checkSuccess(method, path string, r response, mark time.Time, before, after fuzzState) {
	t := fe.t
	t.Helper()
	read := method == http.MethodGet || method == http.MethodHead
	if method != http.MethodHead {
		require.True(t, json.Valid(r.body), "a 2xx with a body that is not JSON: %q", r.body)
	}
	var answer struct {
		TaskID *string        `json:"taskId"`
		Tags   *[]clouddb.Tag `json:"tags"`
	}
	_ = json.Unmarshal(r.body, &answer) // a list is no task: answer stays empty
	made := newTasks(before, after)
	switch {
	case len(made) > 0 || (!read && answer.TaskID != nil):
		if len(made) != 1 {
			t.Fatalf("%s %s: %d new tasks since %s (answer %s)", method, path, len(made), mark.Format(time.RFC3339Nano), r.body)
		}
		if method != http.MethodHead {
			require.NotNil(t, answer.TaskID, "%s %s made task %s but answered %s", method, path, made[0].ID, r.body)
			require.Equal(t, *answer.TaskID, made[0].ID)
		}
		if read {
			// A GET that answers with a task reports on something; it changes nothing.
			require.True(t, strings.HasSuffix(made[0].CommandType, "StatusRequest") || made[0].CommandType == clouddb.CommandCIDRGet,
				"%s %s made a %s task", method, path, made[0].CommandType)
		}
		tk := fe.waitTask(made[0].ID)
		got, err := fe.main.GetTask(testCtx(t), tk.ID)
		require.NoError(t, err)
		require.NotNil(t, got.Response, "task %s: %+v", tk.ID, got)
		switch got.Status {
		case client.TaskCompleted:
			require.Nil(t, got.Response.Error)
		case client.TaskFailed:
			require.NotNil(t, got.Response.Error, "a failed task carries response.error")
			e := got.Response.Error
			require.NotEqual(t, clouddb.ErrTypeGeneral, e.Type, "%s %s %s: the task failed with an internal error: %+v (payload %s)", method, path, r.body, e, tk.Payload)
			require.NotEqual(t, 500, e.StatusCode(), "task error %+v", e)
			require.NotEmpty(t, e.Description)
		default:
			t.Fatalf("task %s ended as %s", tk.ID, got.Status)
		}
	case read:
		require.Equal(t, before, after, "%s %s: a read changed the state", method, path)
		return
	case method == http.MethodPut && strings.HasSuffix(strings.TrimRight(strings.SplitN(path, "?", 2)[0], "/"), "/tags"):
		require.NotNil(t, answer.Tags, "body: %s", r.body)
		i := slices.IndexFunc(after.dbs, func(d *clouddb.Database) bool { return d.ID == fe.db })
		require.GreaterOrEqual(t, i, 0)
		stored := after.dbs[i].Spec.Tags
		if stored == nil {
			stored = []clouddb.Tag{}
		}
		require.Equal(t, *answer.Tags, stored, "the tags answered are the tags stored")
	default:
		t.Fatalf("%s %s answered %d without a task: %s", method, path, r.status, r.body)
	}
	fe.reset()
}

// waitTask waits until the engine has ended the task.
func (fe *fuzzEnv) waitTask(id string) *clouddb.Task {
	t := fe.t
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(testTimeout)
	for {
		var tk *clouddb.Task
		require.NoError(t, fe.store.View(ctx, func(tx clouddb.Tx) error {
			var err error
			tk, err = tx.Task(ctx, 0, id)
			return err
		}))
		if tk.Status.Final() {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s (%s) still %s after %s", id, tk.CommandType, tk.Status, testTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// The body parsers, one target each.

func FuzzCreateSubscription(f *testing.F) {
	fe := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.check(t, http.MethodPost, "/v1/subscriptions", body)
	})
}

func FuzzUpdateSubscription(f *testing.F) {
	fe := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d", fe.sub), body)
	})
}

func FuzzCreateDatabase(f *testing.F) {
	fe := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases", fe.sub), body)
	})
}

func FuzzUpdateDatabase(f *testing.F) {
	fe := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/databases/%d", fe.sub, fe.db), body)
	})
}

func FuzzDatabaseTags(f *testing.F) {
	fe := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/tags", fe.sub, fe.db), body)
	})
}

func FuzzCreateCloudAccount(f *testing.F) {
	fe := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.check(t, http.MethodPost, "/v1/cloud-accounts", body)
	})
}

func FuzzUpdateCloudAccount(f *testing.F) {
	fe := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPut, fmt.Sprintf("/v1/cloud-accounts/%d", fe.ca), body)
	})
}

// FuzzBackup feeds POST …/backup bodies (none, or {"adhocBackupPath"}).
func FuzzBackup(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, seed := range []string{``, `{}`, `null`, `{"adhocBackupPath":"/tmp/clouddb-fuzz"}`, `{"adhocBackupPath":"relative/dir"}`,
		`{"adhocBackupPath":"ftp://user:pw@127.0.0.1:1/x"}`, `{"adhocBackupPath":"gs://bucket/x"}`, `{"adhocBackupPath":7}`, `[]`, `{"adhocBackupPath":"/etc"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/backup", fe.sub, fe.db), body)
	})
}

// FuzzImport feeds POST …/import bodies. The seeds' sources are closed loopback ports or
// refused outright, so that they end fast.
func FuzzImport(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, seed := range []string{``, `{}`, `null`, `{"sourceType":"http","importFromUri":["http://127.0.0.1:1/a.rdb","http://127.0.0.1:1/b.rdb"]}`,
		`{"sourceType":"redis","importFromUri":["redis://user:pw@127.0.0.1:1"]}`, `{"sourceType":"redis","importFromUri":["127.0.0.1:1"]}`,
		`{"sourceType":"ftp","importFromUri":["ftp://127.0.0.1:1/x.rdb"]}`, `{"sourceType":"google-blob-storage","importFromUri":["gs://b/x"]}`,
		`{"sourceType":"http","importFromUri":["http://169.254.169.254/latest"]}`, `{"sourceType":"http","importFromUri":[]}`,
		`{"sourceType":"carrier-pigeon","importFromUri":["x"]}`, `{"sourceType":"http","importFromUri":"http://127.0.0.1:1/x"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPost, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/import", fe.sub, fe.db), body)
	})
}

// fuzzRoutes are the routes FuzzPathParams fills in: {a} and {b} take the fuzzed
// segments; writes carry a valid body, so that a path that parses reaches the task.
var fuzzRoutes = []struct{ method, path, body string }{
	{"GET", "/", ""},
	{"GET", "/payment-methods", ""},
	{"GET", "/regions", ""},
	{"GET", "/data-persistence", ""},
	{"GET", "/database-modules", ""},
	{"GET", "/logs", ""},
	{"GET", "/tasks", ""},
	{"GET", "/tasks/{a}", ""},
	{"GET", "/subscriptions", ""},
	{"POST", "/subscriptions", `{"name":"p","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"d","datasetSizeInGb":1}]}`},
	{"GET", "/subscriptions/redis-versions", ""},
	{"GET", "/subscriptions/{a}", ""},
	{"PUT", "/subscriptions/{a}", `{"name":"renamed"}`},
	{"DELETE", "/subscriptions/{a}", ""},
	{"GET", "/subscriptions/{a}/maintenance-windows", ""},
	{"PUT", "/subscriptions/{a}/maintenance-windows", `{"mode":"manual","windows":[{"days":["Monday"],"startHour":3,"durationInHours":4}]}`},
	{"PUT", "/subscriptions/{a}/resource-tags", `{"resourceTags":[{"key":"k","value":"v"}]}`},
	{"GET", "/subscriptions/{a}/cidr", ""},
	{"PUT", "/subscriptions/{a}/cidr", `{"cidrIps":["10.1.0.0/16"]}`},
	{"GET", "/subscriptions/{a}/pricing", ""},
	{"GET", "/subscriptions/{a}/databases", ""},
	{"POST", "/subscriptions/{a}/databases", `{"name":"fuzzed","memoryLimitInGb":0.1,"password":"pw-fuzz"}`},
	{"GET", "/subscriptions/{a}/databases/{b}", ""},
	{"PUT", "/subscriptions/{a}/databases/{b}", `{"memoryLimitInGb":0.2,"replicaOf":null}`},
	{"DELETE", "/subscriptions/{a}/databases/{b}", ""},
	{"GET", "/subscriptions/{a}/databases/{b}/tags", ""},
	{"PUT", "/subscriptions/{a}/databases/{b}/tags", `{"tags":[{"key":"k","value":"v"}]}`},
	{"POST", "/subscriptions/{a}/databases/{b}/backup", ""},
	{"GET", "/subscriptions/{a}/databases/{b}/backup", ""},
	{"POST", "/subscriptions/{a}/databases/{b}/import", `{"sourceType":"http","importFromUri":["http://127.0.0.1:9/x.rdb"]}`},
	{"GET", "/subscriptions/{a}/databases/{b}/import", ""},
	{"POST", "/subscriptions/{a}/databases/{b}/upgrade", `{"targetRedisVersion":"7.2"}`},
	{"GET", "/subscriptions/{a}/databases/{b}/upgrade", ""},
	{"GET", "/subscriptions/{a}/databases/{b}/available-target-versions", ""},
	{"GET", "/cloud-accounts", ""},
	{"POST", "/cloud-accounts", `{"name":"n","accessKeyId":"k","accessSecretKey":"s","consoleUsername":"u","consolePassword":"p","signInLoginUrl":"https://x"}`},
	{"GET", "/cloud-accounts/{a}", ""},
	{"PUT", "/cloud-accounts/{a}", `{"name":"renamed"}`},
	{"DELETE", "/cloud-accounts/{a}", ""},
	{"GET", "/acl/redisRules", ""},
	{"POST", "/acl/redisRules", `{"name":"fuzz-rule","redisRule":"+@read ~*"}`},
	{"PUT", "/acl/redisRules/{a}", `{"redisRule":"+@read ~k*"}`},
	{"DELETE", "/acl/redisRules/{a}", ""},
	{"GET", "/acl/roles", ""},
	{"POST", "/acl/roles", `{"name":"fuzz-role","redisRules":[{"ruleName":"Read-Only","databases":[{"subscriptionId":1,"databaseId":1}]}]}`},
	{"PUT", "/acl/roles/{a}", `{"name":"renamed"}`},
	{"DELETE", "/acl/roles/{a}", ""},
	{"GET", "/acl/users", ""},
	{"GET", "/acl/users/{a}", ""},
	{"POST", "/acl/users", `{"name":"fuzz-user","role":"fuzz-role","password":"Fuzz.pa55word"}`},
	{"PUT", "/acl/users/{a}", `{"password":"Fuzz.n3w-word"}`},
	{"DELETE", "/acl/users/{a}", ""},
}

var fuzzMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}

// FuzzPathParams fills the routes' path parameters and query with fuzzed strings, in
// which $sub, $db, $ca and $task stand for the main account's resources and $osub, $odb,
// $oca and $otask for the other account's. A route number past the table sends the first
// segment as the whole path. A method number that is a multiple of 4 keeps the route's
// method; others pick any method.
func FuzzPathParams(f *testing.F) {
	fe := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, method, route uint8, a, b, query string) {
		fe.use(t)
		ids := strings.NewReplacer(
			"$osub", strconv.Itoa(fe.otherSub), "$odb", strconv.Itoa(fe.otherDB), "$oca", strconv.Itoa(fe.otherCA), "$otask", fe.otherTask,
			"$sub", strconv.Itoa(fe.sub), "$db", strconv.Itoa(fe.db), "$ca", strconv.Itoa(fe.ca), "$task", fe.task)
		a, b, query = ids.Replace(a), ids.Replace(b), ids.Replace(query)
		var m, path string
		var body []byte
		if int(route) < len(fuzzRoutes) {
			r := fuzzRoutes[route]
			m, path = r.method, "/v1"+strings.NewReplacer("{a}", a, "{b}", b).Replace(r.path)
			if r.body != "" {
				body = []byte(r.body)
			}
		} else {
			m, path = "GET", a
			if !strings.HasPrefix(path, "/") {
				path = "/" + path
			}
		}
		if method%4 != 0 {
			m = fuzzMethods[int(method)%len(fuzzMethods)]
		}
		if query != "" {
			path += "?" + query
		}
		fe.check(t, m, path, body)
	})
}

// TestWriteFuzzSeeds writes the seed corpus of the fuzz targets into testdata/fuzz when
// CLOUDDB_WRITE_FUZZ_SEEDS=1; otherwise it checks that every seed is there.
func TestWriteFuzzSeeds(t *testing.T) {
	write := os.Getenv("CLOUDDB_WRITE_FUZZ_SEEDS") == "1"
	for target, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		if write {
			require.NoError(t, os.MkdirAll(dir, 0o755))
		}
		for name, args := range seeds {
			var b strings.Builder
			b.WriteString("go test fuzz v1\n")
			for _, a := range args {
				switch v := a.(type) {
				case []byte: // the encoding of `go test -fuzz` (internal/fuzz)
					fmt.Fprintf(&b, "[]byte(%q)\n", v)
				case string:
					fmt.Fprintf(&b, "string(%q)\n", v)
				case uint8:
					fmt.Fprintf(&b, "byte(%q)\n", v)
				default:
					t.Fatalf("seed %s/%s: type %T", target, name, a)
				}
			}
			path := filepath.Join(dir, "seed-"+name)
			if write {
				require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
				continue
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err, "seed missing: run CLOUDDB_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds ./cloudapi/")
			require.Equal(t, b.String(), string(got), "seed %s is stale: run CLOUDDB_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds ./cloudapi/", path)
		}
	}
}

// fuzzSeeds are realistic bodies (what the Terraform provider and the Go client send, see
// reference/cloud-api-wire.md §14) and nasty ones, by target. They stay under about 1 KB:
// `go test -fuzz` stops fuzzing while it minimizes a new interesting input, and the
// minimization of an input grown from a large seed takes the whole -fuzzminimizetime.
func fuzzSeeds() map[string]map[string][]any {
	body := func(s string) []any { return []any{[]byte(s)} }
	nasty := map[string]string{
		"empty":         ``,
		"null":          `null`,
		"array":         `[]`,
		"string":        `"x"`,
		"number":        `1e400`,
		"truncated":     `{"name":`,
		"two-objects":   `{}{}`,
		"trailing":      `{} x`,
		"empty-object":  `{}`,
		"deep":          strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100),
		"bad-utf8":      "{\"name\":\"\xff\xfe\"}",
		"nul":           `{"name":"a\u0000b"}`,
		"dup-keys":      `{"name":"a","name":"b"}`,
		"case-keys":     `{"NAME":"a","Name":"b"}`,
		"huge-int":      `{"paymentMethodId":99999999999999999999999}`,
		"neg-zero":      `{"memoryLimitInGb":-0}`,
		"float-int":     `{"paymentMethodId":1.0}`,
		"exp-int":       `{"paymentMethodId":1e2}`,
		"unknown-field": `{"whatever":{"nested":[1,2,{"x":null}]}}`,
	}
	withNasty := func(m map[string][]any) map[string][]any {
		for k, v := range nasty {
			m["nasty-"+k] = body(v)
		}
		return m
	}
	return map[string]map[string][]any{
		"FuzzCreateSubscription": withNasty(map[string][]any{
			"terraform":      body(`{"name":"tf-sub","dryRun":false,"paymentMethodId":1,"paymentMethod":"credit-card","memoryStorage":"ram","cloudProviders":[{"provider":"AWS","cloudAccountId":1,"regions":[{"region":"us-east-1","multipleAvailabilityZones":false,"preferredAvailabilityZones":["use1-az1"],"networking":{"deploymentCIDR":"10.0.0.0/24"}}]}],"databases":[{"name":"tf-db","protocol":"redis","datasetSizeInGb":1,"supportOSSClusterApi":false,"replication":false,"throughputMeasurement":{"by":"operations-per-second","value":1000},"quantity":1}],"publicEndpointAccess":true}`),
			"readme":         body(`{"name":"demo","paymentMethodId":1,"cloudProviders":[{"provider":"AWS","cloudAccountId":1,"regions":[{"region":"us-east-1","networking":{"deploymentCIDR":"10.0.0.0/24"}}]}],"databases":[{"name":"cache","datasetSizeInGb":1}]}`),
			"dry-run":        body(`{"name":"dry","dryRun":true,"paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","memoryLimitInGb":0.5}]}`),
			"quantity":       body(`{"name":"many","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"q","datasetSizeInGb":0.1,"quantity":100},{"name":"q-2","datasetSizeInGb":0.1}]}`),
			"ports":          body(`{"name":"ports","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","datasetSizeInGb":1,"port":21005,"quantity":2}]}`),
			"marketplace":    body(`{"name":"mp","paymentMethod":"marketplace","cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","datasetSizeInGb":1}]}`),
			"other-ca":       body(`{"name":"x","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":4,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","datasetSizeInGb":1}]}`),
			"modules-tls":    body(`{"name":"x","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","datasetSizeInGb":1,"modules":[{"name":"RedisJSON"}],"enableTls":true}]}`),
			"bad-cidr":       body(`{"name":"x","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1","networking":{"deploymentCIDR":"10.0.0.1/24"}}]}],"databases":[{"name":"a","datasetSizeInGb":1}]}`),
			"sizes":          body(`{"name":"x","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","datasetSizeInGb":1024,"memoryLimitInGb":1e-9}]}`),
			"active-active":  body(`{"name":"x","deploymentType":"active-active","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","datasetSizeInGb":1}]}`),
			"wrong-types":    body(`{"name":5,"paymentMethodId":"1","cloudProviders":{"cloudAccountId":1},"databases":"a"}`),
			"null-fields":    body(`{"name":null,"paymentMethodId":null,"cloudProviders":[null],"databases":[null]}`),
			"memcached":      body(`{"name":"x","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","protocol":"memcached","datasetSizeInGb":1}]}`),
			"alerts-backup":  body(`{"name":"x","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","datasetSizeInGb":1,"alerts":[{"name":"latency","value":-1}],"remoteBackup":{"active":true,"interval":"every-6-hours","timeUTC":"25:00"}}]}`),
			"go-client":      body(`{"name":"go","paymentMethodId":1,"memoryStorage":"ram","cloudProviders":[{"provider":"AWS","cloudAccountId":1,"regions":[{"region":"us-east-1","multipleAvailabilityZones":false,"preferredAvailabilityZones":["use1-az1"],"networking":{"deploymentCIDR":"10.0.0.0/24"}}]}],"databases":[{"name":"go-db","protocol":"redis","memoryLimitInGb":1,"dataPersistence":"aof-every-write","replication":true,"throughputMeasurement":{"by":"number-of-shards","value":2},"quantity":2,"averageItemSizeInBytes":100}],"redisVersion":"7.2","persistentStorageEncryptionType":"cloud-provider-managed-key"}` + "\n"),
			"dup-plan-names": body(`{"name":"x","paymentMethodId":1,"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1"}]}],"databases":[{"name":"a","datasetSizeInGb":1,"quantity":2},{"name":"a-2","datasetSizeInGb":1}]}`),
		}),
		"FuzzUpdateSubscription": withNasty(map[string][]any{
			"terraform":    body(`{"name":"tf-sub","paymentMethodId":1,"publicEndpointAccess":true}`),
			"rename":       body(`{"name":"renamed"}`),
			"grace":        body(`{"deletionGracePeriod":"remove-immediately","paymentMethod":"credit-card"}`),
			"other-pm":     body(`{"paymentMethodId":2}`),
			"cmk":          body(`{"customerManagedKeys":[{"resourceName":"k","region":"us-east-1"}]}`),
			"empty-name":   body(`{"name":""}`),
			"long-name":    body(`{"name":"` + strings.Repeat("n", 41) + `"}`),
			"bad-grace":    body(`{"deletionGracePeriod":"never"}`),
			"wrong-types":  body(`{"name":[],"paymentMethodId":true,"publicEndpointAccess":"yes"}`),
			"server-owned": body(`{"id":99,"status":"active","accountId":2}`),
		}),
		"FuzzCreateDatabase": withNasty(map[string][]any{
			"terraform":       body(`{"name":"tf-db","protocol":"redis","datasetSizeInGb":1,"supportOSSClusterApi":false,"dataPersistence":"none","dataEvictionPolicy":"volatile-lru","replication":false,"throughputMeasurement":{"by":"operations-per-second","value":1000},"password":"tf-Pass-1"}`),
			"readme":          body(`{"name":"sessions","memoryLimitInGb":0.5,"password":"s3cret-Pass","dataEvictionPolicy":"allkeys-lru"}`),
			"go-client":       body(`{"name":"go-db","protocol":"redis","memoryLimitInGb":0.2,"respVersion":"resp3","dataPersistence":"aof-every-1-second","sourceIp":["10.0.0.0/8"],"clientTlsCertificates":[{"publicCertificatePEMString":"-----BEGIN CERTIFICATE-----"}],"password":"pw","alerts":[{"name":"dataset-size","value":80}],"enableTls":false,"port":21010,"remoteBackup":{"active":true,"interval":"every-12-hours","timeUTC":"03:00","storageType":"aws-s3","storagePath":"s3://b/p"},"queryPerformanceFactor":"Standard","autoMinorVersionUpgrade":true}` + "\n"),
			"pem-strings":     body(`{"name":"pem","memoryLimitInGb":0.1,"password":"pw","clientTlsCertificates":["-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"]}`),
			"replica-of":      body(`{"name":"r","memoryLimitInGb":0.1,"password":"pw","replicaOf":["redis://127.0.0.1:6379"]}`),
			"replica-of-null": body(`{"name":"r","memoryLimitInGb":0.1,"password":"pw","replicaOf":null}`),
			"no-password":     body(`{"name":"nopw","memoryLimitInGb":0.1}`),
			"bad-name":        body(`{"name":"bad name!","memoryLimitInGb":0.1,"password":"pw"}`),
			"taken-name":      body(`{"name":"db","memoryLimitInGb":0.1,"password":"pw"}`),
			"resize":          body(`{"name":"big","memoryLimitInGb":1024,"password":"pw"}`),
			"port-out":        body(`{"name":"p","memoryLimitInGb":0.1,"password":"pw","port":80}`),
			"port-neg":        body(`{"name":"p","memoryLimitInGb":0.1,"password":"pw","port":-1}`),
			"modules":         body(`{"name":"m","memoryLimitInGb":0.1,"password":"pw","modules":[{"name":"RediSearch"}]}`),
			"memcached":       body(`{"name":"m","protocol":"memcached","memoryLimitInGb":0.1,"password":"pw"}`),
			"password-space":  body(`{"name":"s","memoryLimitInGb":0.1,"password":"has space"}`),
			"password-ctrl":   body(`{"name":"s","memoryLimitInGb":0.1,"password":"a\u0007b"}`),
			"bad-enums":       body(`{"name":"e","memoryLimitInGb":0.1,"password":"pw","dataPersistence":"sometimes","dataEvictionPolicy":"random","respVersion":"resp4","throughputMeasurement":{"by":"vibes","value":-1},"ramPercentage":101}`),
			"bad-cidr":        body(`{"name":"c","memoryLimitInGb":0.1,"password":"pw","sourceIp":["not-a-cidr"]}`),
			"neg-size":        body(`{"name":"n","memoryLimitInGb":-1,"password":"pw"}`),
			"wrong-types":     body(`{"name":"a","clientTlsCertificates":5,"replicaOf":"x","alerts":{}}`),
			"quantity":        body(`{"name":"q","memoryLimitInGb":0.1,"password":"pw","quantity":50}`),
			"dry-run":         body(`{"dryRun":true,"name":"dry","memoryLimitInGb":0.1,"password":"pw"}`),
		}),
		"FuzzUpdateDatabase": withNasty(map[string][]any{
			"terraform":        body(`{"name":"db","datasetSizeInGb":1,"supportOSSClusterApi":false,"useExternalEndpointForOSSClusterApi":false,"dataEvictionPolicy":"volatile-lru","replication":false,"throughputMeasurement":{"by":"operations-per-second","value":1000},"dataPersistence":"none","replicaOf":[],"sourceIp":["0.0.0.0/0"],"password":"tf-Pass-1","alerts":[],"enableTls":false,"enableDefaultUser":true}`),
			"go-client":        body(`{"memoryLimitInGb":0.5,"replicaOf":null}` + "\n"),
			"password":         body(`{"password":"new-Pass"}`),
			"empty-password":   body(`{"password":""}`),
			"rename":           body(`{"name":"renamed"}`),
			"resize":           body(`{"memoryLimitInGb":1000}`),
			"zero-size":        body(`{"memoryLimitInGb":0,"datasetSizeInGb":0}`),
			"replica-of":       body(`{"replicaOf":["redis://127.0.0.1:6379"]}`),
			"tls-certs":        body(`{"clientTlsCertificates":[{"publicCertificatePEMString":"pem"}],"enableTls":true}`),
			"clear-lists":      body(`{"alerts":[],"sourceIp":[],"regexRules":[],"clientTlsCertificates":[]}`),
			"regex-rules":      body(`{"regexRules":[".*\\{(?<tag>.*)\\}.*","(?<tag>.*)"]}`),
			"backup":           body(`{"remoteBackup":{"active":true,"interval":"every-1-hours","timeUTC":"12:30","storageType":"ftp","storagePath":"ftp://h/p"},"periodicBackupPath":"/tmp/x"}`),
			"bad-enums":        body(`{"dataPersistence":"x","dataEvictionPolicy":"y","respVersion":"z"}`),
			"wrong-types":      body(`{"alerts":{},"clientTlsCertificates":[5],"replicaOf":{"endpoints":[]},"enableDefaultUser":"yes"}`),
			"server-owned":     body(`{"databaseId":99,"status":"active","publicEndpoint":"x:1","security":{"password":"p"}}`),
			"null-everything":  body(`{"name":null,"memoryLimitInGb":null,"password":null,"alerts":null,"replicaOf":null}`),
			"modules-protocol": body(`{"modules":[{"name":"x"}],"protocol":"memcached"}`),
		}),
		"FuzzDatabaseTags": withNasty(map[string][]any{
			"terraform":    body(`{"tags":[]}`),
			"tags":         body(`{"tags":[{"key":"env","value":"prod"},{"key":"team","value":""}]}`),
			"dup-keys":     body(`{"tags":[{"key":"a","value":"1"},{"key":"a","value":"2"}]}`),
			"empty-key":    body(`{"tags":[{"key":"","value":"v"}]}`),
			"long-key":     body(`{"tags":[{"key":"` + strings.Repeat("k", 129) + `","value":"v"}]}`),
			"long-value":   body(`{"tags":[{"key":"k","value":"` + strings.Repeat("v", 257) + `"}]}`),
			"null-tags":    body(`{"tags":null}`),
			"no-tags":      body(`{"other":[]}`),
			"wrong-types":  body(`{"tags":[{"key":5,"value":true}]}`),
			"unicode":      body(`{"tags":[{"key":"ключ","value":"值\u2028"}]}`),
			"tag-objects":  body(`{"tags":[{"key":"k","value":"v","extra":{}}]}`),
			"many":         body(`{"tags":[` + manyTags(20) + `]}`),
			"null-element": body(`{"tags":[null]}`),
		}),
		"FuzzCreateCloudAccount": withNasty(map[string][]any{
			"go-client":     body(`{"accessKeyId":"AKIAEXAMPLE","accessSecretKey":"secret","consoleUsername":"user","consolePassword":"pass","name":"aws","provider":"AWS","signInLoginUrl":"https://example.signin.aws.amazon.com/console"}` + "\n"),
			"gcp":           body(`{"accessKeyId":"k","accessSecretKey":"s","consoleUsername":"u","consolePassword":"p","name":"gcp","provider":"GCP","signInLoginUrl":"https://x"}`),
			"no-provider":   body(`{"accessKeyId":"k","accessSecretKey":"s","consoleUsername":"u","consolePassword":"p","name":"n","signInLoginUrl":"https://x"}`),
			"bad-provider":  body(`{"accessKeyId":"k","accessSecretKey":"s","consoleUsername":"u","consolePassword":"p","name":"n","provider":"Azure","signInLoginUrl":"https://x"}`),
			"missing":       body(`{"name":"n"}`),
			"empty-strings": body(`{"accessKeyId":"","accessSecretKey":"","consoleUsername":"","consolePassword":"","name":"","signInLoginUrl":""}`),
			"wrong-types":   body(`{"accessKeyId":[],"name":{},"provider":1}`),
			"server-owned":  body(`{"id":1,"status":"active","accountId":2,"name":"n"}`),
		}),
		"FuzzUpdateCloudAccount": withNasty(map[string][]any{
			"go-client":    body(`{"accessKeyId":"AKIANEW","accessSecretKey":"new","consoleUsername":"user","consolePassword":"pass","name":"aws","signInLoginUrl":"https://example.signin.aws.amazon.com/console"}` + "\n"),
			"rename":       body(`{"name":"renamed"}`),
			"provider":     body(`{"provider":"AWS"}`),
			"empty-name":   body(`{"name":""}`),
			"wrong-types":  body(`{"name":1,"consolePassword":{}}`),
			"server-owned": body(`{"id":1,"status":"deleting"}`),
		}),
		"FuzzPathParams": {
			"account":              {uint8(0), uint8(0), "", "", ""},
			"logs-paging":          {uint8(0), uint8(5), "", "", "limit=1000&offset=0&resourceId=$db"},
			"logs-bad":             {uint8(0), uint8(5), "", "", "limit=0&offset=-1&resourceId=x"},
			"task":                 {uint8(0), uint8(7), "$task", "", ""},
			"other-task":           {uint8(0), uint8(7), "$otask", "", ""},
			"task-garbage":         {uint8(0), uint8(7), "../../subscriptions", "", ""},
			"subscription":         {uint8(0), uint8(11), "$sub", "", ""},
			"other-subscription":   {uint8(0), uint8(11), "$osub", "", ""},
			"subscription-zero":    {uint8(0), uint8(11), "0", "", ""},
			"subscription-neg":     {uint8(0), uint8(11), "-1", "", ""},
			"subscription-huge":    {uint8(0), uint8(11), "99999999999999999999", "", ""},
			"subscription-int64":   {uint8(0), uint8(11), "9223372036854775807", "", ""},
			"subscription-plus":    {uint8(0), uint8(11), "+1", "", ""},
			"subscription-hex":     {uint8(0), uint8(11), "0x1", "", ""},
			"subscription-unicode": {uint8(0), uint8(11), "١", "", ""},
			"subscription-escaped": {uint8(0), uint8(11), "%31", "", ""},
			"subscription-update":  {uint8(0), uint8(12), "$sub", "", ""},
			"subscription-delete":  {uint8(0), uint8(13), "$sub", "", ""},
			"other-sub-delete":     {uint8(0), uint8(13), "$osub", "", ""},
			"redis-versions":       {uint8(0), uint8(10), "", "", "subscriptionId=$sub"},
			"redis-versions-bad":   {uint8(0), uint8(10), "", "", "subscriptionId=abc"},
			"redis-versions-go":    {uint8(0), uint8(99), "/v1/subscriptions/redis-versions%3FsubscriptionId=$sub", "", ""},
			"databases":            {uint8(0), uint8(16), "$sub", "", "limit=100&offset=0"},
			"databases-paging":     {uint8(0), uint8(16), "$sub", "", "limit=100&offset=100"},
			"databases-limit-0":    {uint8(0), uint8(16), "$sub", "", "limit=0"},
			"databases-limit-big":  {uint8(0), uint8(16), "$sub", "", "limit=101&offset=1073741825"},
			"databases-repeated":   {uint8(0), uint8(16), "$sub", "", "limit=1&limit=x&offset=%00"},
			"database-create":      {uint8(0), uint8(17), "$sub", "", ""},
			"database-create-oth":  {uint8(0), uint8(17), "$osub", "", ""},
			"database":             {uint8(0), uint8(18), "$sub", "$db", ""},
			"database-wrong-sub":   {uint8(0), uint8(18), "$osub", "$db", ""},
			"database-other":       {uint8(0), uint8(18), "$osub", "$odb", ""},
			"database-update":      {uint8(0), uint8(19), "$sub", "$db", ""},
			"database-delete":      {uint8(0), uint8(20), "$sub", "$db", ""},
			"tags":                 {uint8(0), uint8(21), "$sub", "$db", ""},
			"tags-put":             {uint8(0), uint8(22), "$sub", "$db", ""},
			"tags-put-other":       {uint8(0), uint8(22), "$osub", "$odb", ""},
			"backup":               {uint8(0), uint8(23), "$sub", "$db", ""},
			"import":               {uint8(0), uint8(25), "$sub", "$db", ""},
			"cloud-account":        {uint8(0), uint8(29), "$ca", "", ""},
			"cloud-account-intern": {uint8(0), uint8(30), "1", "", ""},
			"cloud-account-other":  {uint8(0), uint8(31), "$oca", "", ""},
			"method-patch":         {uint8(11), uint8(11), "$sub", "", ""},
			"method-head":          {uint8(5), uint8(18), "$sub", "$db", ""},
			"method-options":       {uint8(6), uint8(0), "", "", ""},
			"raw-double-slash":     {uint8(0), uint8(99), "//v1//subscriptions//$sub//", "", ""},
			"raw-no-v1":            {uint8(0), uint8(99), "/subscriptions/$sub/databases/$db", "", ""},
			"raw-dot-dot":          {uint8(0), uint8(99), "/v1/subscriptions/../tasks", "", ""},
			"raw-encoded-slash":    {uint8(0), uint8(99), "/v1/subscriptions/$sub%2Fdatabases", "", ""},
			"raw-unknown":          {uint8(0), uint8(99), "/v2/subscriptions", "", ""},
			"raw-healthz":          {uint8(0), uint8(99), "/healthz", "", ""},
			"raw-question":         {uint8(0), uint8(99), "/v1/tasks%3F%3F%3F", "", "a=%zz"},
			"raw-long":             {uint8(0), uint8(99), "/v1/" + strings.Repeat("a/", 100), "", strings.Repeat("x=1&", 50)},
		},
	}
}

func manyTags(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`{"key":"k%d","value":"v%d"}`, i, i))
	}
	return strings.Join(parts, ",")
}
