package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// fillEveryType writes many keys of every type, some with TTLs, into r.
func fillEveryType(t *testing.T, r *redis.Client, prefix string, n int) {
	t.Helper()
	ctx := testContext(t)
	p := r.Pipeline()
	for i := range n {
		k := fmt.Sprintf("%s:%d", prefix, i)
		switch i % 7 {
		case 0:
			p.Set(ctx, k+":str", strings.Repeat("x", i%50), 0)
		case 1:
			p.HSet(ctx, k+":hash", "a", i, "b", "two")
		case 2:
			p.RPush(ctx, k+":list", "a", "b", i)
		case 3:
			p.SAdd(ctx, k+":set", "a", "b", i)
		case 4:
			p.ZAdd(ctx, k+":zset", redis.Z{Score: float64(i) / 3, Member: "m"}, redis.Z{Score: 1, Member: "n"})
		case 5:
			p.XAdd(ctx, &redis.XAddArgs{Stream: k + ":stream", Values: []any{"f", i}})
		case 6:
			p.Set(ctx, k+":ttl", "expiring", time.Hour)
		}
	}
	_, err := p.Exec(ctx)
	require.NoError(t, err)
}

// requireSameData compares two servers key for key: DUMP of each key, and TTLs.
func requireSameData(t *testing.T, a, b *redis.Client) {
	t.Helper()
	require.Equal(t, a.DBSize(testContext(t)).Val(), b.DBSize(testContext(t)).Val(), "same number of keys")
	requireHolds(t, a, b)
}

// requireHolds checks that b holds every key of a, with the same value and TTL.
func requireHolds(t *testing.T, a, b *redis.Client) {
	t.Helper()
	ctx := testContext(t)
	keys, err := a.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		da, err := a.Dump(ctx, k).Result()
		require.NoError(t, err)
		db, err := b.Dump(ctx, k).Result()
		require.NoError(t, err, k)
		switch typ := a.Type(ctx, k).Val(); typ {
		// A reload may order hashtable elements differently: their DUMPs can differ
		// with the same contents, so the contents are compared.
		case "set":
			require.Equal(t, typ, b.Type(ctx, k).Val(), k)
			ma, mb := a.SMembers(ctx, k).Val(), b.SMembers(ctx, k).Val()
			slices.Sort(ma)
			slices.Sort(mb)
			require.NotEmpty(t, ma, k)
			require.Equal(t, ma, mb, "members of %s", k)
		case "hash":
			require.Equal(t, typ, b.Type(ctx, k).Val(), k)
			ha := a.HGetAll(ctx, k).Val()
			require.NotEmpty(t, ha, k)
			require.Equal(t, ha, b.HGetAll(ctx, k).Val(), "fields of %s", k)
		default:
			require.Equal(t, da, db, "DUMP of %s", k)
		}
		ta, tb := a.PTTL(ctx, k).Val(), b.PTTL(ctx, k).Val()
		if ta < 0 {
			require.Equal(t, ta, tb, "no TTL on %s", k)
		} else {
			require.InDelta(t, float64(ta), float64(tb), float64(30*time.Second), "TTL of %s", k)
		}
	}
}

// taskResource waits for a status task and decodes its response.resource.
func taskResource(t *testing.T, s *service, task *client.Task, v any) {
	t.Helper()
	done, err := s.c.WaitForTask(testContext(t), task.ID)
	require.NoError(t, err)
	require.NotNil(t, done.Response)
	require.NoError(t, json.Unmarshal(done.Response.Resource, v), string(done.Response.Resource))
}

type operationStatus struct {
	Status         string `json:"status"`
	LastBackupTime string `json:"lastBackupTime"`
	LastImportTime string `json:"lastImportTime"`
	FailureReason  string `json:"failureReason"`
}

// TestBackupThenImport: a dataset of every type survives a backup to a local path and an
// import over HTTP into another database, key for key; the status tasks report both.
func TestBackupThenImport(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	backups := t.TempDir()
	subID, _ := s.activeSubscription(ctx, "bk", 1)
	src := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("src"), MemoryLimitInGB: client.Ptr(0.2), Password: client.Ptr("pw-src"),
		PeriodicBackupPath: client.Ptr(backups)})
	dst := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("dst"), MemoryLimitInGB: client.Ptr(0.2), Password: client.Ptr("pw-dst")})
	srcID, dstID := src.ID, dst.ID
	require.Equal(t, backups, src.Backup.Destination)
	rs, rd := redisOf(t, src), redisOf(t, dst)
	fillEveryType(t, rs, "k", 700)
	require.NoError(t, rd.Set(ctx, "replaced", "by the import", 0).Err())

	// No backup path: the task fails with DATABASE_BACKUP_DISABLED.
	task, err := s.c.BackupDatabase(ctx, subID, dstID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "DATABASE_BACKUP_DISABLED", cerr.Type)
	require.Equal(t, "400 BAD_REQUEST", cerr.Status)

	// Backup: the task completes when the file is complete.
	task, err = s.c.BackupDatabase(ctx, subID, srcID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(backups, "src-*.rdb"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one file named by database and time")
	var st operationStatus
	statusTask, err := s.c.BackupStatus(ctx, subID, srcID)
	require.NoError(t, err)
	taskResource(t, s, statusTask, &st)
	require.Equal(t, "success", st.Status)
	_, err = time.Parse(time.RFC3339, st.LastBackupTime)
	require.NoError(t, err)

	// Import the file over HTTP into the other database.
	web := httptest.NewServer(http.FileServer(http.Dir(backups)))
	defer web.Close()
	task, err = s.c.ImportDatabase(ctx, subID, dstID, client.Import{SourceType: client.Ptr("http"),
		ImportFromURI: []string{web.URL + "/" + filepath.Base(files[0])}})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	requireSameData(t, rs, rd)
	statusTask, err = s.c.ImportStatus(ctx, subID, dstID)
	require.NoError(t, err)
	taskResource(t, s, statusTask, &st)
	require.Equal(t, "success", st.Status)
	require.NotEmpty(t, st.LastImportTime)
}

// TestImportSources: several URIs are the parts of one import; a redis source is copied
// key for key.
func TestImportSources(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	dir := t.TempDir()
	subID, _ := s.activeSubscription(ctx, "imp", 1)
	mk := func(name string) (*client.Database, *redis.Client) {
		db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr(name), MemoryLimitInGB: client.Ptr(0.2), Password: client.Ptr("pw-" + name),
			PeriodicBackupPath: client.Ptr(dir)})
		return db, redisOf(t, db)
	}
	a, ra := mk("part-a")
	b, rb := mk("part-b")
	dst, rd := mk("dst")
	fillEveryType(t, ra, "a", 100)
	fillEveryType(t, rb, "b", 100)
	for _, db := range []*client.Database{a, b} {
		task, err := s.c.BackupDatabase(ctx, subID, db.ID)
		require.NoError(t, err)
		_, err = s.c.WaitForTask(ctx, task.ID)
		require.NoError(t, err)
	}
	parts, err := filepath.Glob(filepath.Join(dir, "part-*.rdb"))
	require.NoError(t, err)
	require.Len(t, parts, 2)

	task, err := s.c.ImportDatabase(ctx, subID, dst.ID, client.Import{SourceType: client.Ptr("http"), ImportFromURI: fileURIs(t, parts)})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ra.DBSize(ctx).Val()+rb.DBSize(ctx).Val(), rd.DBSize(ctx).Val(), "both parts are loaded, and nothing else")
	requireHolds(t, ra, rd)
	requireHolds(t, rb, rd)

	// A live redis source (another database of the account, with its password).
	task, err = s.c.ImportDatabase(ctx, subID, dst.ID, client.Import{SourceType: client.Ptr("redis"),
		ImportFromURI: []string{"redis://:" + a.Security.Password + "@" + a.PublicEndpoint}})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	requireSameData(t, ra, rd)
}

// fileURIs serves the files over HTTP and returns their URLs.
func fileURIs(t *testing.T, files []string) []string {
	t.Helper()
	web := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(files[0]))))
	t.Cleanup(web.Close)
	var out []string
	for _, f := range files {
		out = append(out, web.URL+"/"+filepath.Base(f))
	}
	return out
}

// TestImportFailures: each failure ends the task with the cause, the import status says
// why, and the database keeps its data.
func TestImportFailures(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	dir := t.TempDir()
	subID, _ := s.activeSubscription(ctx, "fail", 1)
	big := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("big"), MemoryLimitInGB: client.Ptr(0.5), Password: client.Ptr("pw-big"),
		PeriodicBackupPath: client.Ptr(dir)})
	dst := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("small"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-small")})
	bigID, dstID := big.ID, dst.ID
	rbig, rd := redisOf(t, big), redisOf(t, dst)
	p := rbig.Pipeline()
	// 150 MiB in memory, more than the small database may hold (the smallest size there
	// is); the values compress, so the backup file stays small.
	for i := range 150 {
		p.Set(ctx, fmt.Sprintf("big:%d", i), strings.Repeat("v", 1<<20), 0)
	}
	_, err := p.Exec(ctx)
	require.NoError(t, err)
	require.NoError(t, rd.Set(ctx, "precious", "kept", 0).Err())
	task, err := s.c.BackupDatabase(ctx, subID, bigID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	bigFile, err := filepath.Glob(filepath.Join(dir, "big-*.rdb"))
	require.NoError(t, err)
	require.Len(t, bigFile, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "corrupt.rdb"), []byte("REDIS0009\xfa garbage, not a dump"), 0o600))
	web := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer web.Close()

	for _, tc := range []struct {
		name, typ, uri, reason string
	}{
		{"corrupt file", "http", web.URL + "/corrupt.rdb", "file-corrupted"},
		{"missing file", "http", web.URL + "/nothing-here.rdb", "file-not-found"},
		{"unreachable", "http", "http://127.0.0.1:1/x.rdb", "source-unreachable"},
		{"metadata address", "http", "http://169.254.169.254/latest/x.rdb", "forbidden-address"},
		{"larger than the limit", "http", web.URL + "/" + filepath.Base(bigFile[0]), "data-too-large"},
		{"bad credentials", "redis", "redis://:wrong@" + big.PublicEndpoint, "authentication-failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, err := s.c.ImportDatabase(ctx, subID, dstID, client.Import{SourceType: client.Ptr(tc.typ), ImportFromURI: []string{tc.uri}})
			require.NoError(t, err)
			_, err = s.c.WaitForTask(ctx, task.ID)
			var cerr *client.Error
			require.ErrorAs(t, err, &cerr)
			require.Equal(t, "DATABASE_IMPORT_FAILED", cerr.Type)
			require.Contains(t, cerr.Description, tc.reason)
			require.NotContains(t, cerr.Description, "wrong", "no password in the error")
			var st operationStatus
			statusTask, err := s.c.ImportStatus(ctx, subID, dstID)
			require.NoError(t, err)
			taskResource(t, s, statusTask, &st)
			require.Equal(t, "failed", st.Status)
			require.Equal(t, tc.reason, st.FailureReason)
			require.Equal(t, "kept", rd.Get(ctx, "precious").Val(), "the database is left as it was")
			require.Equal(t, int64(1), rd.DBSize(ctx).Val())
		})
	}

	// Shapes the processing phase refuses before any work.
	for _, body := range []client.Import{
		{SourceType: client.Ptr("carrier-pigeon"), ImportFromURI: []string{"x"}},
		{SourceType: client.Ptr("http")},
		{SourceType: client.Ptr("aws-s3"), ImportFromURI: []string{"http://h/x.rdb"}},
		{SourceType: client.Ptr("redis"), ImportFromURI: []string{"gopher://h:1"}},
	} {
		task, err := s.c.ImportDatabase(ctx, subID, dstID, body)
		require.NoError(t, err)
		_, err = s.c.WaitForTask(ctx, task.ID)
		var cerr *client.Error
		require.ErrorAs(t, err, &cerr, "%+v", body)
		require.Equal(t, "400 BAD_REQUEST", cerr.Status, "%+v: %v", body, err)
	}
}

// TestReplicaOf: a database made a replica of two sources of the same account takes their
// data and every later write within a second, refuses client writes, drops a removed
// source's changes, and is writable again with no sources.
func TestReplicaOf(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "rep", 1)
	mk := func(name string) (*client.Database, *redis.Client) {
		db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr(name), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-" + name)})
		return db, redisOf(t, db)
	}
	a, ra := mk("source-a")
	b, rb := mk("source-b")
	r, rr := mk("replica")
	require.NoError(t, ra.Set(ctx, "a-before", "1", 0).Err())
	require.NoError(t, rb.Set(ctx, "b-before", "1", 0).Err())

	update := func(sources []string) {
		t.Helper()
		task, err := s.c.UpdateDatabase(ctx, subID, r.ID, client.UpdateDatabase{ReplicaOf: sources})
		require.NoError(t, err)
		_, err = s.c.WaitForTask(ctx, task.ID)
		require.NoError(t, err)
		_, err = s.c.WaitForDatabaseStatus(ctx, subID, r.ID, "active")
		require.NoError(t, err)
	}
	// A same-account source is given as host:port; clouddb supplies its password.
	update([]string{a.PublicEndpoint, "redis://:" + b.Security.Password + "@" + b.PublicEndpoint})
	got, err := s.c.GetDatabase(ctx, subID, r.ID)
	require.NoError(t, err)
	require.NotNil(t, got.ReplicaOf)
	require.Equal(t, []string{a.PublicEndpoint, "redis://:" + b.Security.Password + "@" + b.PublicEndpoint}, got.ReplicaOf.Endpoints)

	eventually(t, 5*time.Second, "full copy of both sources", func() bool {
		return rr.Get(ctx, "a-before").Val() == "1" && rr.Get(ctx, "b-before").Val() == "1"
	})
	require.ErrorContains(t, rr.Set(ctx, "client-write", "x", 0).Err(), "NOPERM", "a replica refuses client writes")
	require.NoError(t, ra.HSet(ctx, "a-later", "f", "v").Err())
	require.NoError(t, rb.Incr(ctx, "b-later").Err())
	eventually(t, time.Second, "writes on the sources within a second", func() bool {
		return rr.HGet(ctx, "a-later", "f").Val() == "v" && rr.Get(ctx, "b-later").Val() == "1"
	})

	// The list is the complete desired list: b is removed.
	update([]string{a.PublicEndpoint})
	require.NoError(t, rb.Set(ctx, "b-after-removal", "1", 0).Err())
	require.NoError(t, ra.Set(ctx, "a-still", "1", 0).Err())
	eventually(t, time.Second, "a still replicates", func() bool { return rr.Get(ctx, "a-still").Val() == "1" })
	require.Zero(t, rr.Exists(ctx, "b-after-removal").Val(), "a removed source's changes stop")

	// null changes nothing; [] removes every source.
	update(nil)
	got, err = s.c.GetDatabase(ctx, subID, r.ID)
	require.NoError(t, err)
	require.Equal(t, []string{a.PublicEndpoint}, got.ReplicaOf.Endpoints, "null means no change")
	update([]string{})
	got, err = s.c.GetDatabase(ctx, subID, r.ID)
	require.NoError(t, err)
	require.Nil(t, got.ReplicaOf)
	require.NoError(t, rr.Set(ctx, "client-write", "x", 0).Err(), "writable again")

	// Bad sources fail the task.
	for _, bad := range [][]string{{r.PublicEndpoint}, {"127.0.0.1:1"}, {"http://x:1"}} {
		task, err := s.c.UpdateDatabase(ctx, subID, r.ID, client.UpdateDatabase{ReplicaOf: bad})
		require.NoError(t, err)
		_, err = s.c.WaitForTask(ctx, task.ID)
		require.Error(t, err, "%v", bad)
	}
}

// TestReplicaSourceGoesAway: a source that stops is retried and reported in GET /logs.
func TestReplicaSourceGoesAway(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "gone", 1)
	src := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("source"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-s")})
	rep := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("replica"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-r")})
	srcID, repID := src.ID, rep.ID
	task, err := s.c.UpdateDatabase(ctx, subID, repID, client.UpdateDatabase{ReplicaOf: []string{src.PublicEndpoint}})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	logHas := func(part string) func() bool {
		return func() bool {
			logs, err := s.c.Logs(context.Background(), client.LogQuery{})
			require.NoError(t, err)
			for _, e := range logs {
				if e.ResourceID == repID && strings.Contains(e.Description, part) {
					return true
				}
			}
			return false
		}
	}
	eventually(t, 10*time.Second, "streaming reported", logHas("is streaming"))
	require.NoError(t, s.m.Driver.Stop(ctx, srcID)) // the source goes away
	eventually(t, 10*time.Second, "the lost source is reported", logHas("is error"))
}

// TestBackupFailure: a backup whose destination cannot be reached fails its task with the
// cause, and GET …/backup reports the failure and its reason, without the destination's
// password; the database is untouched.
func TestBackupFailure(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now
	subID, _ := s.activeSubscription(ctx, "bkfail", 0.2)
	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("src"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw"),
		PeriodicBackupPath: client.Ptr("ftp://user:ftp-secret-7c1@" + closed + "/backups")})
	r := redisOf(t, db)
	require.NoError(t, r.Set(ctx, "k", "v", 0).Err())

	task, err := s.c.BackupDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	done, err := s.c.WaitForTask(ctx, task.ID)
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "DATABASE_BACKUP_FAILED", cerr.Type)
	require.Contains(t, cerr.Description, "source-unreachable")
	raw, _ := json.Marshal(done)
	require.NotContains(t, string(raw), "ftp-secret-7c1", "the task does not show the destination's password")

	var st operationStatus
	statusTask, err := s.c.BackupStatus(ctx, subID, db.ID)
	require.NoError(t, err)
	taskResource(t, s, statusTask, &st)
	require.Equal(t, "failed", st.Status)
	require.Equal(t, "source-unreachable", st.FailureReason)
	require.Equal(t, "v", r.Get(ctx, "k").Val())
}

// TestBackupDirs: local backups go only under --backup-dirs: a path outside is refused when
// it is set, an ad hoc backup there fails with forbidden-address and writes nothing, and a
// path inside works. (Users choose backup paths; without this they could make clouddb
// write wherever its own user may.)
func TestBackupDirs(t *testing.T) {
	t.Parallel()
	allowed, outside := t.TempDir(), t.TempDir()
	s := startService(t, t.TempDir(), options{backupDirs: allowed})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "dirs", 0.2)

	tk, err := s.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("out"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw"),
		PeriodicBackupPath: client.Ptr(outside)})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "INVALID_FIELD", cerr.Type)
	require.Contains(t, cerr.Description, "periodicBackupPath")
	require.Contains(t, cerr.Description, "is outside the directories backups may be written to")

	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("in"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw"),
		PeriodicBackupPath: client.Ptr(filepath.Join(allowed, "nightly"))})
	path := fmt.Sprintf("/subscriptions/%d/databases/%d/backup", subID, db.ID)
	var adhoc client.Task
	require.NoError(t, s.c.Do(ctx, http.MethodPost, path, map[string]string{"adhocBackupPath": outside}, &adhoc))
	_, err = s.c.WaitForTask(ctx, adhoc.ID)
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "DATABASE_BACKUP_FAILED", cerr.Type)
	require.Contains(t, cerr.Description, "forbidden-address")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was written outside --backup-dirs")

	tk, err = s.c.BackupDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(allowed, "nightly", "in-*.rdb"))
	require.NoError(t, err)
	require.Len(t, files, 1)
}
