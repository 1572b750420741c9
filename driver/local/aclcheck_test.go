package local_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
	"clouddb/internal/redistest"
)

// Environment of the test binary when it plays a redis-server (TestFakeRedisServer).
const (
	fakeRedisConf   = "CLOUDDB_FAKE_REDIS_CONF"
	fakeRedisRefuse = "CLOUDDB_FAKE_REDIS_REFUSE"
)

// recordingServer is a stand-in redis-server of version (major.minor, see redistest)
// that runs the real redis-server or, with fake, this test binary playing one that
// accepts every ACL rule but those naming a word of refuse (see TestFakeRedisServer): no
// real Redis installable here refuses a command that 7.0 knows.
func recordingServer(t *testing.T, version string, fake bool, refuse ...string) (bin string, runs *redistest.StandIn) {
	t.Helper()
	run := ""
	if fake {
		self, err := os.Executable()
		require.NoError(t, err)
		run = fmt.Sprintf("%s=\"$1\" %s='%s' exec '%s' -test.run='^TestFakeRedisServer$'",
			fakeRedisConf, fakeRedisRefuse, strings.Join(refuse, " "), self)
	}
	s := redistest.NewStandIn(t, version+".0", run)
	return s.Path, s
}

// checkDriver is a driver offering the given versions, by binary, def first (the
// default).
func checkDriver(t *testing.T, bins map[string]string, def string) *local.Driver {
	t.Helper()
	var servers []local.RedisBinary
	for _, v := range append([]string{def}, slices.Sorted(maps.Keys(bins))...) {
		if v == def && len(servers) > 0 {
			continue
		}
		b, err := local.ProbeRedisServer(t.Context(), bins[v])
		require.NoError(t, err)
		servers = append(servers, b)
	}
	d, err := local.New(local.Config{
		Dir:          t.TempDir(),
		Host:         "127.0.0.1",
		StartTimeout: 20 * time.Second,
		RedisServers: servers,
		Logger:       slog.New(slog.NewTextHandler(newTestWriter(t), nil)),
	})
	require.NoError(t, err)
	return d
}

// TestCheckACLRules_EveryVersion: a rule is verified on every version offered, not only
// the default one: a command the default (newer) version knows and an older one does not
// is refused, and the refusal names that version.
func TestCheckACLRules_EveryVersion(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	newer, newerRuns := recordingServer(t, "7.4", true)
	older, olderRuns := recordingServer(t, "7.0", false)
	d := checkDriver(t, map[string]string{"7.4": newer, "7.0": older}, "7.4")

	require.NoError(t, d.CheckACLRules(ctx, []string{"+@read ~*"}))
	require.Equal(t, 1, olderRuns.Runs(t))
	require.Equal(t, 1, newerRuns.Runs(t))
	err := d.CheckACLRules(ctx, []string{"+@read ~*", "+hexpire ~*"})
	e := clouddb.AsError(err)
	require.NotNil(t, e, "%v", err)
	require.Equal(t, clouddb.ErrTypeACLRulePatternInvalid, e.Type)
	require.Equal(t, `Invalid ACL redis rule "+hexpire ~*": Redis 7.0 refuses "+hexpire": Unknown command or category name in ACL`, e.Description)
	require.Equal(t, 2, olderRuns.Runs(t), "the older version, not the default, is asked")
	require.Equal(t, 1, newerRuns.Runs(t), "refused by the oldest: the newer one is not asked")

	// And what the default version alone refuses is refused too.
	refusing, _ := recordingServer(t, "7.4", true, "+@newcategory")
	d = checkDriver(t, map[string]string{"7.4": refusing, "7.0": older}, "7.4")
	text, reason, ok := clouddb.ACLRuleRefusal(d.CheckACLRules(ctx, []string{"+@read ~* +@newcategory"}))
	require.True(t, ok)
	require.Equal(t, "+@read ~* +@newcategory", text)
	require.Contains(t, reason, `refuses "+@newcategory"`)
}

// TestCheckACLRules_OneServerPerBinary: a batch of rules costs one throwaway server per
// binary, whatever its size; the oldest version is asked first, and its refusal is the
// batch's; verdicts are remembered, so that asking again costs nothing and a batch with
// one new rule one server per binary.
func TestCheckACLRules_OneServerPerBinary(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b70, runs70 := recordingServer(t, "7.0", false)
	b72, runs72 := recordingServer(t, "7.2", false)
	d := checkDriver(t, map[string]string{"7.2": b72, "7.0": b70}, "7.2")
	good := []string{"+@read ~*", "+@all -@dangerous ~*", "+get ~a:*", "+set ~b:*", "+@hash ~h:*"}
	rules := append(slices.Clone(good), "+nosuchcommand ~*", "-@nonsense")
	text, _, ok := clouddb.ACLRuleRefusal(d.CheckACLRules(ctx, rules))
	require.True(t, ok)
	require.Equal(t, "+nosuchcommand ~*", text, "the first rule refused")
	require.Equal(t, 1, runs70.Runs(t), "one server for the whole batch")
	require.Zero(t, runs72.Runs(t), "refused by the oldest version: no need to ask the next")

	// Remembered: the same refusal, no server.
	text, _, _ = clouddb.ACLRuleRefusal(d.CheckACLRules(ctx, rules))
	require.Equal(t, "+nosuchcommand ~*", text)
	require.Equal(t, 1, runs70.Runs(t))
	require.NoError(t, d.CheckACLRules(ctx, good))
	require.Equal(t, 1, runs70.Runs(t), "7.0's verdicts are remembered")
	require.Equal(t, 1, runs72.Runs(t))
	require.NoError(t, d.CheckACLRules(ctx, good))
	require.Equal(t, 1, runs70.Runs(t))
	require.Equal(t, 1, runs72.Runs(t))

	require.NoError(t, d.CheckACLRules(ctx, append(slices.Clone(good), "+hget ~h:*")))
	require.Equal(t, 2, runs70.Runs(t))
	require.Equal(t, 2, runs72.Runs(t))
}

// TestFakeRedisServer is no test: run by a stand-in of recordingServer, it plays a
// redis-server on the unix socket of the config file named in fakeRedisConf that accepts
// every ACL rule but those whose words are in fakeRedisRefuse, until it is killed.
func TestFakeRedisServer(t *testing.T) {
	confPath := os.Getenv(fakeRedisConf)
	if confPath == "" {
		t.Skip("run by a stand-in redis-server only")
	}
	conf, err := os.ReadFile(confPath)
	require.NoError(t, err)
	var sock string
	for line := range strings.Lines(string(conf)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "unixsocket "); ok {
			sock = strings.Trim(v, `"`)
		}
	}
	require.NotEmpty(t, sock)
	refuse := strings.Fields(os.Getenv(fakeRedisRefuse))
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	for {
		conn, err := l.Accept()
		require.NoError(t, err)
		go fakeServe(conn, refuse)
	}
}

// fakeServe answers RESP commands: ACL SETUSER with OK or redis' refusal of the first
// word in refuse, HELLO as a server without it, anything else with OK.
func fakeServe(conn net.Conn, refuse []string) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		reply := "+OK\r\n"
		if len(args) > 0 && strings.EqualFold(args[0], "hello") {
			reply = "-ERR unknown command 'hello'\r\n" // go-redis then speaks RESP2 as is
		}
		if len(args) > 3 && strings.EqualFold(args[0], "acl") && strings.EqualFold(args[1], "setuser") {
			for _, w := range args[3:] {
				if fakeRefuses(refuse, w) {
					reply = fmt.Sprintf("-ERR Error in ACL SETUSER modifier '%s': Unknown command or category name in ACL\r\n", w)
					break
				}
			}
		}
		if _, err := io.WriteString(conn, reply); err != nil {
			return
		}
	}
}

func fakeRefuses(refuse []string, w string) bool {
	for _, r := range refuse {
		if r == w {
			return true
		}
	}
	return false
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		if line, err = r.ReadString('\n'); err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// checkHelperEnv makes the test binary play a clouddb that checks a rule on a server
// that never answers, in TestCheckServerDiesWithClouddb.
const checkHelperEnv = "CLOUDDB_ACLCHECK_HELPER"

// TestCheckServerDiesWithClouddb: a clouddb killed outright (kill -9) while it checks
// rules takes the throwaway server with it.
func TestCheckServerDiesWithClouddb(t *testing.T) {
	if bin := os.Getenv(checkHelperEnv); bin != "" {
		d, err := local.New(local.Config{Dir: t.TempDir(), RedisServers: []local.RedisBinary{{Path: bin, Version: "7.0", Full: "7.0.15"}},
			StartTimeout: time.Minute})
		require.NoError(t, err)
		err = d.CheckACLRules(t.Context(), []string{"+get ~never-answered"})
		t.Fatalf("the check was to wait until killed, not end: %v", err)
	}
	t.Parallel()
	real, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	dir := t.TempDir()
	// A server that listens elsewhere than the checker waits for: the check waits on.
	pidFile, elsewhere := filepath.Join(dir, "pid"), filepath.Join(dir, "elsewhere.sock")
	bin := filepath.Join(dir, "redis-server")
	require.NoError(t, os.WriteFile(bin, fmt.Appendf(nil, "#!/bin/sh\necho $$ > '%s'\nexec '%s' \"$@\" --unixsocket '%s'\n",
		pidFile, real, elsewhere), 0o755))

	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckServerDiesWithClouddb$")
	cmd.Env = append(os.Environ(), checkHelperEnv+"="+bin)
	cmd.Stdout, cmd.Stderr = newTestWriter(t), newTestWriter(t)
	require.NoError(t, cmd.Start())
	var server int
	eventuallyT(t, 20*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		server, err = strconv.Atoi(strings.TrimSpace(string(b)))
		_, serr := os.Stat(elsewhere)
		return err == nil && serr == nil // the server runs and listens
	})
	t.Cleanup(func() { _ = syscall.Kill(server, syscall.SIGKILL) })
	require.False(t, processGone(server))

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // killed, as intended
	eventuallyT(t, 10*time.Second, func() bool { return processGone(server) })
}
