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
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
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
	dir, pgCtl string
	cred       *syscall.Credential
	url        string
}

// binDir finds the directory that holds initdb and pg_ctl: PATH first, then the Debian
// layout, newest version first.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("initdb and pg_ctl not found: set %s to a server, or install PostgreSQL (apt-get install -y postgresql)", EnvURL)
}

// startCluster makes and starts a cluster in a temporary directory. PostgreSQL refuses
// to run as root, so as root the cluster belongs to, and runs as, the postgres user.
func startCluster() (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "clouddb-pgtest-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, pgCtl: filepath.Join(bin, "pg_ctl")}
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
		// fsync off: the cluster is thrown away, and durability is not what these tests test.
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", port, dir)
		out, err := c.run(c.pgCtl, "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts)
		if err == nil {
			c.url = fmt.Sprintf("postgres://clouddb@127.0.0.1:%d/postgres?sslmode=disable", port)
			return c, nil
		}
		if attempt == 2 {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
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

func (c *cluster) stop() {
	if _, err := c.run(c.pgCtl, "stop", "-m", "immediate", "-w", "-D", filepath.Join(c.dir, "data")); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: pg_ctl stop: %v\n", err)
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
