package blob_test

// Real servers on loopback for the tests: vsftpd (Debian package vsftpd), Azurite (npm
// package azurite), an S3-compatible server (gofakes3 behind a SigV4-checking handler) and
// a DNS server that answers what a test wants. A missing program fails the test with the
// command that installs it.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"clouddb/internal/s3test"
	"clouddb/internal/syncbuf"
)

// payload returns n deterministic pseudo-random bytes.
func payload(n int, seed uint64) []byte {
	r := mrand.New(mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1, 2, 3}))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(freePort(t))
}

// waitListening waits until addr accepts connections or the process exits.
func waitListening(t *testing.T, addr string, exited <-chan struct{}, output func() string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("server exited before listening on %s; output:\n%s", addr, output())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server not listening on %s after 15s; output:\n%s", addr, output())
}

// startProcess starts cmd, stops it when the test ends, and waits for addr.
func startProcess(t *testing.T, cmd *exec.Cmd, addr string) {
	t.Helper()
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitListening(t, addr, exited, out.String)
}

func lookPath(t *testing.T, name, install string, extraDirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range extraDirs {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	t.Fatalf("%s is required by this test and is not installed: %s (scripts/ensure-deps.sh installs it)", name, install)
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// ---- vsftpd ----

type ftpServer struct {
	addr   string // 127.0.0.1:port
	root   string // anon_root on disk
	upload string // writable directory, "upload" in FTP paths
}

// startVsftpd runs Debian's vsftpd in the foreground on a free loopback port with a
// generated configuration: anonymous login only (any password), write enabled in
// upload/, passive mode. Non-anonymous logins are refused with 530.
func startVsftpd(t *testing.T) *ftpServer {
	t.Helper()
	bin := lookPath(t, "vsftpd", "apt-get install -y vsftpd", "/usr/sbin", "/sbin")
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	s := &ftpServer{root: filepath.Join(dir, "root")}
	s.upload = filepath.Join(s.root, "upload")
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.MkdirAll(s.upload, 0o755))
	require.NoError(t, os.MkdirAll(empty, 0o755))

	var conf strings.Builder
	port := freePort(t)
	s.addr = "127.0.0.1:" + strconv.Itoa(port)
	fmt.Fprintf(&conf, `listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=%d
background=NO
anonymous_enable=YES
local_enable=NO
write_enable=YES
anon_upload_enable=YES
anon_mkdir_write_enable=YES
anon_other_write_enable=YES
anon_world_readable_only=NO
anon_umask=022
anon_root=%s
secure_chroot_dir=%s
seccomp_sandbox=NO
pasv_enable=YES
connect_from_port_20=NO
xferlog_enable=NO
dirmessage_enable=NO
ssl_enable=NO
max_clients=50
idle_session_timeout=60
data_connection_timeout=60
vsftpd_log_file=%s
`, port, s.root, empty, filepath.Join(dir, "vsftpd.log"))
	if os.Geteuid() == 0 {
		ftpUser := "nobody"
		if _, err := user.Lookup("ftp"); err == nil {
			ftpUser = "ftp"
		}
		u, err := user.Lookup(ftpUser)
		require.NoError(t, err)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chown(s.upload, uid, gid))
		fmt.Fprintf(&conf, "ftp_username=%s\n", ftpUser)
	} else {
		// Sessions run as this user: make the root read-only as it is for "ftp" above.
		conf.WriteString("run_as_launching_user=YES\n")
		require.NoError(t, os.Chmod(s.root, 0o555))
		t.Cleanup(func() { _ = os.Chmod(s.root, 0o755) })
	}
	confPath := filepath.Join(dir, "vsftpd.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf.String()), 0o600))
	startProcess(t, exec.Command(bin, confPath), s.addr)
	// vsftpd accepts before it is ready to talk; wait for the banner.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "220") {
				return s
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "vsftpd.log"))
			t.Fatalf("vsftpd gave no 220 banner on %s (last: %v); log:\n%s", s.addr, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- Azurite ----

type azureServer struct {
	hostport string
	account  string
	key      string
}

// startAzurite runs Azurite's blob service (npm package azurite) in memory on a free
// loopback port, with one account and a random key; telemetry is disabled.
func startAzurite(t *testing.T) *azureServer {
	t.Helper()
	bin := lookPath(t, "azurite-blob", "npm install -g azurite (needs nodejs and npm: apt-get install -y nodejs npm)")
	var k [32]byte
	_, _ = rand.Read(k[:])
	s := &azureServer{account: "clouddbtest", key: base64.StdEncoding.EncodeToString(k[:])}
	port := freePort(t)
	s.hostport = "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
		"--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck",
		"--silent", "--loose")
	cmd.Env = append(os.Environ(), "AZURITE_ACCOUNTS="+s.account+":"+s.key)
	cmd.Dir = t.TempDir()
	startProcess(t, cmd, s.hostport)
	return s
}

func createContainer(t *testing.T, s *azureServer, name string) {
	t.Helper()
	cred, err := azblob.NewSharedKeyCredential(s.account, s.key)
	require.NoError(t, err)
	c, err := azblob.NewClientWithSharedKeyCredential("http://"+s.hostport+"/"+s.account, cred, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.CreateContainer(ctx, name, nil)
	require.NoError(t, err)
}

// ---- S3 (gofakes3 behind a SigV4 check, in internal/s3test) ----

type s3Server struct {
	hostport string
	ak, sk   string
	backend  *s3mem.Backend
}

func startS3(t *testing.T, buckets ...string) *s3Server {
	t.Helper()
	return startS3With(t, nil, buckets...)
}

// startS3With is startS3 with a handler wrapped around the server (nil: none).
func startS3With(t *testing.T, wrap func(http.Handler) http.Handler, buckets ...string) *s3Server {
	t.Helper()
	s := s3test.Start(t, wrap, buckets...)
	return &s3Server{hostport: s.HostPort, ak: s.AccessKey, sk: s.SecretKey, backend: s.Backend}
}

// ---- DNS ----
