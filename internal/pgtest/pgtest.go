// Package pgtest gives tests a real PostgreSQL: the server TEST_DATABASE_URL names, or else
// a throwaway cluster made with the machine's initdb and pg_ctl on a loopback port, shared
// by the tests of one package and removed when they end. Each test gets an empty database
// of its own.
//
// A package that uses it calls Main from its TestMain, so that the cluster is stopped
// after the last test, and URL from its tests.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names an existing server to use instead of a throwaway cluster. Its role must be
// allowed to create databases.
const EnvURL = "TEST_DATABASE_URL"

var (
	once    sync.Once
	admin   string // URL of the maintenance database
	started *cluster
	initErr error
	seq     atomic.Int64
)

// Main runs the package's tests and stops the cluster they started, if any.
func Main(m *testing.M) {
	code := m.Run()
	if started != nil {
		started.stop()
	}
	os.Exit(code)
}

// URL returns the address of a new, empty database for t, dropped when t ends. When no
// server is named and none can be started, t fails with what is missing.
func URL(t testing.TB) string {
	t.Helper()
	once.Do(func() { admin, initErr = server() })
	if initErr != nil {
		t.Fatalf("pgtest: no PostgreSQL: %v", initErr)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("clouddb_test_%d_%d", os.Getpid(), seq.Add(1))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("pgtest: %v", err)
			return
		}
		defer conn.Close(ctx)
		// WITH (FORCE) ends connections a test left open, so that the drop cannot hang.
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// Start starts a throwaway cluster for a program outside tests (the benchmark harness) and
// returns the URL of its maintenance database, whose role may create databases, and a
// function that stops the cluster and removes its files. It ignores TEST_DATABASE_URL:
// the caller decides whether to use a named server instead.
func Start() (url string, stop func(), err error) {
	c, err := startCluster()
	if err != nil {
		return "", nil, fmt.Errorf("pgtest: %w", err)
	}
	return c.url, c.stop, nil
}

// server returns the maintenance URL of the server to use, starting one if needed.
func server() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	c, err := startCluster()
	if err != nil {
		return "", err
	}
	started = c
	return c.url, nil
}

// cluster is a throwaway PostgreSQL cluster.
type cluster struct {
	dir  string
	cred *syscall.Credential
	url  string
	// server is the postmaster, a child of this process; exited closes when it ends.
	server *exec.Cmd
	exited chan struct{}
}

// binDir finds the directory that holds initdb and postgres: next to initdb on PATH
// (Debian links only the client tools there), then the Debian layout, newest version
// first.
func binDir() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(versions) - 1; i >= 0; i-- {
		dirs = append(dirs, versions[i])
	}
	for _, d := range dirs {
		_, err1 := os.Stat(filepath.Join(d, "initdb"))
		_, err2 := os.Stat(filepath.Join(d, "postgres"))
		if err1 == nil && err2 == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("initdb and postgres not found: set %s to a server, or install PostgreSQL (apt-get install -y postgresql)", EnvURL)
}

// startCluster makes and starts a cluster in a temporary directory. PostgreSQL refuses
// to run as root, so as root the cluster belongs to, and runs as, the postgres user.
func startCluster() (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	removeStale()
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs a postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run(filepath.Join(bin, "initdb"), "-D", data, "-U", "clouddb", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	// A port that was free a moment ago can be taken before the server binds it, so a
	// few are tried.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		err = c.start(filepath.Join(bin, "postgres"), data, port)
		if err == nil {
			return c, nil
		}
		if attempt == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// start runs the postmaster as a child that the kernel stops (SIGQUIT: immediate
// shutdown) when this process dies, so that a test binary killed on a timeout leaves no
// server behind; then it waits until the server accepts connections.
func (c *cluster) start(postgres, data string, port int) error {
	logPath := filepath.Join(c.dir, "log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	// fsync off: the cluster is thrown away, and durability is not what these tests test.
	cmd := exec.Command(postgres, "-D", data, "-p", strconv.Itoa(port), "-k", c.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Dir, cmd.Stdout, cmd.Stderr = c.dir, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // how it ended is in the log, read below when it ends early
		close(exited)
	}()
	url := fmt.Sprintf("postgres://clouddb@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, url)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			c.url, c.server, c.exited = url, cmd, exited
			return nil
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres exited: %s", out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill() // fails only when it has just exited: exited closes either way
			<-exited
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres not ready after 60s: %s", out)
		}
	}
}

func (c *cluster) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// tempPrefix names the temporary directories of the clusters.
const tempPrefix = "clouddb-pgtest-"

// removeStale removes the directories of clusters whose server died with its test binary
// (killed outright, it could not clean up): those older than any start takes whose
// postmaster is gone or never came. A young directory may be another test binary's
// cluster being made: initdb's own standalone server writes its pid (negated) into
// postmaster.pid and exits.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			pid, err := strconv.Atoi(strings.TrimSpace(first))
			if err == nil && pid != 0 && syscall.Kill(max(pid, -pid), 0) == nil {
				continue // its server runs
			}
		}
		os.RemoveAll(dir)
	}
}

// stop shuts the server down at once (the data is thrown away) and removes the cluster.
func (c *cluster) stop() {
	// Signal and Kill fail only when the server has exited already: c.exited closes either way.
	_ = c.server.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.server.Process.Kill()
		<-c.exited
	}
	os.RemoveAll(c.dir)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
