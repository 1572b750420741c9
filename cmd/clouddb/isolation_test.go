package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// trickle serves an RDB file that never ends: one byte every interval, as a slow or
// hostile import source does, until the client goes away.
func trickle(t *testing.T, interval time.Duration) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var open atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open.Add(1)
		defer open.Add(-1)
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			if _, err := w.Write([]byte{"REDIS0011"[i%9]}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &open
}

// newAccount makes an account with `clouddb admin` on the service's data dir and returns
// a service view that acts as it.
func (s *service) newAccount(name string) *service {
	s.t.Helper()
	var stdout, stderr strings.Builder
	ctx := context.Background()
	require.NoError(s.t, run(ctx, []string{"admin", "accounts", "create", "--name", name, "--data-dir", s.dir}, &stdout, &stderr), stderr.String())
	var id int
	_, err := fmt.Sscanf(stdout.String(), "account %d created", &id)
	require.NoError(s.t, err, stdout.String())
	stdout.Reset()
	require.NoError(s.t, run(ctx, []string{"admin", "keys", "create", "--account", fmt.Sprint(id), "--name", "k", "--data-dir", s.dir}, &stdout, &stderr), stderr.String())
	m := regexp.MustCompile(`x-api-key: (\S+)\nx-api-secret-key: (\S+)`).FindStringSubmatch(stdout.String())
	require.NotNil(s.t, m, stdout.String())
	return &service{t: s.t, m: s.m, dir: s.dir, logs: s.logs,
		c: client.New("http://"+s.m.Addr+"/v1", m[1], m[2], client.WithPollInterval(50*time.Millisecond), client.WithHTTPClient(cloudAPIClient(s.t)))}
}

// TestSlowImportsDoNotDelayOtherAccounts: two accounts import from a source that sends a
// byte every two seconds; a third account's task completes within about a second while
// they run (the engine has two workers: the imports once held both, and the third
// account's task waited for them). Past --data-timeout the imports fail saying so, their
// status says failed, and the connections to the source are closed.
func TestSlowImportsDoNotDelayOtherAccounts(t *testing.T) {
	const limit = 8 * time.Second
	s := startService(t, t.TempDir(), options{dataTimeout: limit})
	ctx := testContext(t)
	src, open := trickle(t, 2*time.Second)
	slow := []*service{s, s.newAccount("slow-b")}
	third := s.newAccount("third")

	type importing struct {
		s      *service
		sub    int
		db     int
		taskID string
	}
	var imports []importing
	for i, a := range slow {
		sub, db := a.activeSubscription(ctx, fmt.Sprintf("slow-%d", i), 0.1)
		task, err := a.c.ImportDatabase(ctx, sub, db.ID, client.Import{SourceType: client.Ptr("http"), ImportFromURI: []string{src.URL + "/dump.rdb"}})
		require.NoError(t, err)
		imports = append(imports, importing{a, sub, db.ID, task.ID})
	}
	eventually(t, 10*time.Second, "both imports are downloading", func() bool { return open.Load() == 2 })

	start := time.Now()
	task, err := third.c.CreateSubscription(ctx, subscriptionBody(third.paymentMethod(ctx), "third", planDB("third-db", 0.1)))
	require.NoError(t, err)
	done, err := third.c.WaitForTask(ctx, task.ID)
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, "processing-completed", done.Status)
	t.Logf("the third account's task took %s while two imports trickled", took)
	require.Less(t, took, 2*time.Second, "another account's task waited for the slow imports")
	for _, im := range imports {
		got, err := im.s.c.GetTask(ctx, im.taskID)
		require.NoError(t, err)
		require.Equal(t, "processing-in-progress", got.Status, "the imports still run")
	}

	for _, im := range imports {
		_, err := im.s.c.WaitForTask(ctx, im.taskID)
		var cerr *client.Error
		require.ErrorAs(t, err, &cerr)
		require.Equal(t, "DATABASE_IMPORT_FAILED", cerr.Type)
		require.Contains(t, cerr.Description, "the import did not finish within 8s (--data-timeout)")
		require.Contains(t, cerr.Description, "(timeout)")
		statusTask, err := im.s.c.ImportStatus(ctx, im.sub, im.db)
		require.NoError(t, err)
		var st operationStatus
		taskResource(t, im.s, statusTask, &st)
		require.Equal(t, "failed", st.Status)
		require.Equal(t, "timeout", st.FailureReason)
	}
	eventually(t, 5*time.Second, "the source's connections are closed", func() bool { return open.Load() == 0 })
}
