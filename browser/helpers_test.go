package browser_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/browser"
	"clouddb/internal/apitest"
)

// testBundle is a browser API served on a random loopback port, with its store in a
// temporary directory.
type testBundle struct {
	path   string
	cipher *clouddb.Cipher
	srv    *browser.Server
	url    string
	// http validates every API request and answer against the OpenAPI document.
	http *http.Client
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	key, err := clouddb.ParseKey(clouddb.NewKey())
	require.NoError(t, err)
	cipher, err := clouddb.NewCipher(key)
	require.NoError(t, err)
	b := &testBundle{path: filepath.Join(t.TempDir(), "browser.db"), cipher: cipher}
	b.start(t)
	return b
}

// start opens the server on the bundle's store and serves it.
func (b *testBundle) start(t *testing.T) {
	t.Helper()
	srv, err := browser.Open(browser.Config{Path: b.path, Cipher: b.cipher, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	b.srv, b.url = srv, hs.URL
	if b.http == nil {
		b.http = apiClient(t)
	}
}

// apiClient is an http.Client that validates the API's requests and answers against
// its OpenAPI document, failing t on a mismatch.
func apiClient(t *testing.T) *http.Client {
	return apitest.NewTransport(t, browser.OpenAPI(), apitest.Options{MapURL: apitest.BrowserPath,
		Skip: func(r *http.Request) bool { return !apitest.BrowserAPI(r) }}).Client()
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// response is an answer of the API.
type response struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// do sends a request; body is sent as it is when it is a string, as JSON otherwise.
// header holds pairs of header names and values.
func (b *testBundle) do(t *testing.T, method, path string, body any, header ...string) response {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		buf, err := json.Marshal(v)
		require.NoError(t, err)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if strings.EqualFold(header[i], "Host") {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	if b.http == nil {
		b.http = apiClient(t)
	}
	res, err := b.http.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := response{status: res.StatusCode, header: res.Header, raw: string(raw)}
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(t, json.Unmarshal(raw, &out.body), "body: %s", raw)
	}
	return out
}

func (b *testBundle) get(t *testing.T, path string) response {
	t.Helper()
	return b.do(t, http.MethodGet, path, nil)
}

func (b *testBundle) post(t *testing.T, path string, body any) response {
	t.Helper()
	return b.do(t, http.MethodPost, path, body)
}

func (b *testBundle) del(t *testing.T, path string) response {
	t.Helper()
	return b.do(t, http.MethodDelete, path, nil)
}

// requireStatus checks the status and shows the body when it differs.
func requireStatus(t *testing.T, res response, status int) {
	t.Helper()
	require.Equal(t, status, res.status, "body: %s", res.raw)
}

// requireError checks an error answer: status, its reason phrase as error, the machine
// code, the field at fault ("" for none) and words its message must hold.
func requireError(t *testing.T, res response, status int, code, field string, words ...string) {
	t.Helper()
	requireStatus(t, res, status)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	require.Equal(t, float64(status), res.body["statusCode"], "body: %s", res.raw)
	require.Equal(t, http.StatusText(status), res.body["error"], "the reason phrase, body: %s", res.raw)
	require.Equal(t, code, res.body["code"], "body: %s", res.raw)
	if field == "" {
		require.NotContains(t, res.body, "field", "body: %s", res.raw)
	} else {
		require.Equal(t, field, res.body["field"], "body: %s", res.raw)
	}
	msg, _ := res.body["message"].(string)
	require.NotEmpty(t, msg)
	for _, w := range words {
		require.Contains(t, msg, w)
	}
}

// id reads an integer id from a JSON body.
func id(t *testing.T, v any) int {
	t.Helper()
	f, ok := v.(float64)
	require.True(t, ok, "id %v is not a number", v)
	require.Equal(t, f, float64(int(f)), "id %v is not an integer", v)
	return int(f)
}

// createCert posts a pair and returns its id.
func (b *testBundle) createCert(t *testing.T, name, cert, key string) int {
	t.Helper()
	res := b.post(t, "/api/tls-client-cert/", map[string]any{"name": name, "cert": cert, "key": key})
	requireStatus(t, res, http.StatusCreated)
	return id(t, res.body["certificate"].(map[string]any)["id"])
}

// certNames lists the names of the stored pairs.
func (b *testBundle) certNames(t *testing.T) []string {
	t.Helper()
	res := b.get(t, "/api/tls-client-cert/")
	requireStatus(t, res, http.StatusOK)
	names := []string{}
	for _, c := range res.body["certificates"].([]any) {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	return names
}

// connectionCount is the number of stored connection records.
func (b *testBundle) connectionCount(t *testing.T) int {
	t.Helper()
	res := b.get(t, "/api/db/")
	requireStatus(t, res, http.StatusOK)
	return len(res.body["dbs"].([]any))
}

// requireNoSecrets checks that an answer holds none of the given secrets nor any PEM.
func requireNoSecrets(t *testing.T, raw string, secrets ...string) {
	t.Helper()
	require.NotContains(t, raw, "-----BEGIN")
	require.NotContains(t, raw, "-----END")
	for _, s := range secrets {
		require.NotContains(t, raw, s)
	}
}

// --- redis-server processes ---

func requireRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install -y redis-server")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// server is a redis-server (or sentinel) process started by a test.
type server struct {
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// startRedis starts a redis-server on port, without persistence, with the extra
// arguments (which may override the defaults), and waits until the port accepts
// connections. The process is killed when the test ends.
func startRedis(t *testing.T, port int, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", ""}, extra...)
	return startProcess(t, port, dir, args...)
}

// startProcess runs redis-server with args and waits until port accepts connections.
func startProcess(t *testing.T, port int, dir string, args ...string) *server {
	t.Helper()
	requireRedis(t)
	logPath := filepath.Join(dir, "process.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	setProcAttr(cmd)
	require.NoError(t, cmd.Start())
	s := &server{port: port, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // it is killed: the exit status says nothing
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			if buf, err := os.ReadFile(logPath); err == nil {
				t.Logf("redis-server %v:\n%s", args, tail(string(buf), 2000))
			}
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s
		}
		select {
		case <-s.done:
			buf, _ := os.ReadFile(logPath)
			t.Fatalf("redis-server %v exited: %s", args, buf)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server %v does not accept connections on %s after 10s", args, s.addr())
		}
	}
}

// kill stops the process and waits for it to be gone.
func (s *server) kill() {
	_ = s.cmd.Process.Kill() // it may have exited already
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// client returns a go-redis client of one server, closed when the test ends.
func client(t *testing.T, addr, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: 2, DisableIdentity: true, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond every 50ms for at most d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startCluster starts n cluster-enabled servers with a password, splits the slots among
// them, joins them and waits for cluster_state:ok on every node.
func startCluster(t *testing.T, n int, password string) []*server {
	t.Helper()
	ctx := context.Background()
	nodes := make([]*server, n)
	for i := range nodes {
		nodes[i] = startClusterNode(t, password)
	}
	per := 16384 / n
	for i, s := range nodes {
		lo, hi := i*per, (i+1)*per-1
		if i == n-1 {
			hi = 16383
		}
		require.NoError(t, client(t, s.addr(), password).Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err())
	}
	first := client(t, nodes[0].addr(), password)
	for _, s := range nodes[1:] {
		require.NoError(t, first.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(s.port)).Err())
	}
	for _, s := range nodes {
		c := client(t, s.addr(), password)
		eventually(t, 20*time.Second, "cluster_state:ok at "+s.addr(), func() bool {
			info, err := c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n))
		})
	}
	return nodes
}

func startClusterNode(t *testing.T, password string) *server {
	t.Helper()
	dir := t.TempDir()
	return startRedis(t, freePort(t), "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", "5000", "--requirepass", password, "--masterauth", password)
}

// --- certificates ---

// authority is a CA made by a test.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

var serial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(time.Now().UnixNano() + serial.Add(1)) }

func newCA(t *testing.T, name string) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &authority{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue makes a certificate and key for cn, valid in [notBefore, notAfter], for server
// and client authentication, and for localhost and 127.0.0.1.
func (ca *authority) issue(t *testing.T, cn string, notBefore, notAfter time.Time) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// valid issues a certificate valid from an hour ago for a day.
func (ca *authority) valid(t *testing.T, cn string) (certPEM, keyPEM string) {
	t.Helper()
	return ca.issue(t, cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }
