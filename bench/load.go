package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The load generator: each client is one keep-alive HTTP/1.1 connection that sends a
// prebuilt GET and reads the whole answer before sending the next. It is deliberately
// small and allocation-free in its loop, so that on two cores it takes as little CPU from
// the server under test as possible, and it is the same for clouddb and for the bare
// handler.

// loadResult is one run of the load generator.
type loadResult struct {
	Requests int
	RPS      float64
	P50, P99 time.Duration
}

// maxRequestsPerClient bounds a run even if the clock misbehaves.
const maxRequestsPerClient = 5_000_000

// getRequest builds the raw request for path on host with the API key headers.
func getRequest(host, path string) []byte {
	return []byte("GET " + path + " HTTP/1.1\r\nHost: " + host +
		"\r\nUser-Agent: clouddb-bench\r\nAccept: application/json\r\nx-api-key: " + benchKey +
		"\r\nx-api-secret-key: " + benchSecret + "\r\n\r\n")
}

// runLoad runs clients concurrent keep-alive clients against addr for warmup+dur and
// records the requests that completed within the dur window after the warm-up. Every
// answer must be a 200 with a body of wantLen bytes (when wantLen > 0).
func runLoad(ctx context.Context, addr string, req []byte, wantLen, clients int, warmup, dur time.Duration) (loadResult, error) {
	conns := make([]net.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range clients {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return loadResult{}, err
		}
		conns = append(conns, c)
	}
	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+dur)
	lats := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			_ = c.SetDeadline(until.Add(30 * time.Second))
			rd := bufio.NewReaderSize(c, 32<<10)
			rec := make([]time.Duration, 0, 1<<14)
			for n := 0; n < maxRequestsPerClient && ctx.Err() == nil; n++ {
				t0 := time.Now()
				if t0.After(until) {
					break
				}
				if _, err := c.Write(req); err != nil {
					errs[i] = err
					break
				}
				size, err := readResponse(rd)
				if err != nil {
					errs[i] = err
					break
				}
				if wantLen > 0 && size != wantLen {
					errs[i] = fmt.Errorf("answer of %d bytes, want %d", size, wantLen)
					break
				}
				t1 := time.Now()
				if !t0.Before(from) && !t1.After(until) {
					rec = append(rec, t1.Sub(t0))
				}
			}
			lats[i] = rec
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return loadResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return loadResult{}, err
	}
	all := slices.Concat(lats...)
	if len(all) == 0 {
		return loadResult{}, fmt.Errorf("no request completed within %s", dur)
	}
	slices.Sort(all)
	return loadResult{
		Requests: len(all),
		RPS:      float64(len(all)) / dur.Seconds(),
		P50:      quantile(all, 0.50),
		P99:      quantile(all, 0.99),
	}, nil
}

// timeRequests sends n requests one after another on one connection and returns their
// latencies, sorted.
func timeRequests(ctx context.Context, addr string, req []byte, n int) ([]time.Duration, error) {
	return timeSequence(ctx, addr, [][]byte{req}, n)
}

// timeSequence sends the requests one after another, n times over, on one connection, and
// returns how long each pass took, sorted.
func timeSequence(ctx context.Context, addr string, reqs [][]byte, n int) ([]time.Duration, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	rd := bufio.NewReaderSize(c, 64<<10)
	out := make([]time.Duration, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		for _, req := range reqs {
			if _, err := c.Write(req); err != nil {
				return nil, err
			}
			if _, err := readResponse(rd); err != nil {
				return nil, err
			}
		}
		out = append(out, time.Since(t0))
	}
	slices.Sort(out)
	return out, nil
}

var errNotOK = errors.New("answer is not 200 OK")

// readResponse reads one HTTP/1.1 answer and discards its body, returning the body size.
// It understands Content-Length and chunked bodies; anything but 200 is an error.
func readResponse(rd *bufio.Reader) (int, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return 0, fmt.Errorf("%w: %q", errNotOK, bytes.TrimSpace(line))
	}
	length, chunked := -1, false
	for {
		line, err = rd.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, fmt.Errorf("bad Content-Length %q", value)
			}
		case asciiEqualFold(name, "Transfer-Encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "Connection"):
			if asciiEqualFold(value, "close") {
				return 0, errors.New("server closes the connection")
			}
		}
	}
	if !chunked {
		if length < 0 {
			return 0, errors.New("answer without Content-Length")
		}
		_, err = rd.Discard(length)
		return length, err
	}
	total := 0
	for {
		line, err = rd.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		hex, _, _ := strings.Cut(strings.TrimSpace(string(line)), ";")
		n, err := strconv.ParseInt(hex, 16, 32)
		if err != nil {
			return 0, fmt.Errorf("bad chunk size %q", line)
		}
		if _, err := rd.Discard(int(n) + 2); err != nil {
			return 0, err
		}
		if n == 0 {
			return total, nil
		}
		total += int(n)
	}
}

func asciiEqualFold(b []byte, s string) bool {
	return len(b) == len(s) && strings.EqualFold(string(b), s)
}

// quantile is the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// capture GETs a URL with the bench key pair and returns the answer's body, which must be
// a 200.
func capture(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-api-key", benchKey)
	req.Header.Set("x-api-secret-key", benchSecret)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body, nil
}

// The bare server: the harness runs itself again as a separate process (like clouddb, so
// that neither shares a Go runtime with the load generator) that serves one body on every
// path with a plain net/http handler, writing it as clouddb's JSON writer does.

const bareEnv = "CLOUDDB_BENCH_BARE_BODY"

// serveBareFromEnv serves the bare handler when the process was started as the bare
// server; it reports whether it was (and then only returns when killed).
func serveBareFromEnv() bool {
	path := os.Getenv(bareEnv)
	if path == "" {
		return false
	}
	body, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare server:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare server:", err)
		os.Exit(1)
	}
	fmt.Printf("bare server at %s\n", ln.Addr())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body) // a failed write shows at the client as a broken answer
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	_ = srv.Serve(ln)
	os.Exit(1)
	return true
}

// startBare starts the bare server serving body and returns it with its address.
func (r *reaper) startBare(ctx context.Context, dir string, body []byte) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	f, err := os.CreateTemp(dir, "bare-body-*.json")
	if err != nil {
		return nil, "", err
	}
	if _, err = f.Write(body); err != nil {
		f.Close()
		return nil, "", err
	}
	f.Close()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), bareEnv+"="+filepath.Clean(f.Name()))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	p, err := r.start(cmd)
	if err != nil {
		return nil, "", err
	}
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "bare server at "); ok {
				addrs <- a
			}
		}
	}()
	select {
	case a := <-addrs:
		return p, a, nil
	case <-p.done:
		return nil, "", fmt.Errorf("bare server exited: %v", p.err)
	case <-time.After(30 * time.Second):
		p.kill()
		return nil, "", errors.New("bare server printed no address within 30s")
	case <-ctx.Done():
		p.kill()
		return nil, "", ctx.Err()
	}
}
