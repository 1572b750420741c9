package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reaper remembers every process the harness starts and the directories whose
// redis-server processes are ours, so that all of them are killed at the end, on failure
// too. Processes are only ever signalled by pid.
type reaper struct {
	mu    sync.Mutex
	procs []*proc
	roots []string
}

// proc is a started child process; a goroutine reaps it.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("pid %d still running after %s", p.pid(), d)
	}
}

// kill sends SIGKILL and waits (bounded) for the process to be reaped.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.wait(10 * time.Second)
}

// start starts cmd and registers it.
func (r *reaper) start(cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p, nil
}

// own registers a directory: redis-server processes whose working directory lies under
// it were started by a clouddb this harness runs.
func (r *reaper) own(dir string) {
	r.mu.Lock()
	r.roots = append(r.roots, dir)
	r.mu.Unlock()
}

// killAll kills every registered process still running, then every redis-server under a
// registered directory.
func (r *reaper) killAll() {
	r.mu.Lock()
	procs, roots := append([]*proc(nil), r.procs...), append([]string(nil), r.roots...)
	r.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	for _, root := range roots {
		killRedisUnder(root)
	}
}

// redisPids lists the live redis-server processes (pgrep -x redis-server) whose working
// directory is under root. Zombies have no working directory and are not listed.
func redisPids(root string) ([]int, error) {
	out, err := exec.Command("pgrep", "-x", "redis-server").Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return nil, nil // none at all
	}
	if err != nil {
		return nil, fmt.Errorf("pgrep: %w", err)
	}
	root = filepath.Clean(root) + string(filepath.Separator)
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + f + "/cwd")
		if err != nil {
			continue
		}
		if strings.HasPrefix(cwd+string(filepath.Separator), root) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killRedisUnder SIGKILLs the redis-server processes under root and waits (bounded) until
// they are gone.
func killRedisUnder(root string) {
	pids, _ := redisPids(root)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if left, _ := redisPids(root); len(left) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clouddbProc is a running `clouddb serve`.
type clouddbProc struct {
	*proc
	url string // http://HOST:PORT/v1
}

// host is HOST:PORT of the API.
func (c *clouddbProc) host() string {
	return strings.TrimSuffix(strings.TrimPrefix(c.url, "http://"), "/v1")
}

// benchRateLimit is the per-key rate limit of the clouddb the harness runs.
const benchRateLimit = 1 << 30

var servingRe = regexp.MustCompile(`serving the cloud API at (\S+)`)

// startClouddb runs `clouddb serve` on a loopback port of its choosing with the bootstrap
// key pair, appends its logs to logPath, and returns once it has printed its address.
func (r *reaper) startClouddb(ctx context.Context, bin, dataDir, ports, logPath string) (*clouddbProc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// The browser API is off: its fixed default port may be taken by another clouddb.
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0",
		"--advertise-host", "127.0.0.1", "--db-ports", ports, "--browser-listen", "",
		// The databases are empty: their memory limits, summed, would pass the machine's
		// memory at the larger scale sizes, and that budget is not what is measured.
		"--db-memory", "0")
	// The rate limit stays on (its bookkeeping is part of every request's cost) but so
	// high that the load never reaches it.
	cmd.Env = append(os.Environ(), "CLOUDDB_BOOTSTRAP_API_KEY="+benchKey, "CLOUDDB_BOOTSTRAP_SECRET_KEY="+benchSecret,
		"CLOUDDB_RATE_LIMIT="+strconv.Itoa(benchRateLimit))
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p, err := r.start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if m := servingRe.FindStringSubmatch(sc.Text()); m != nil && !sent {
				urls <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case u := <-urls:
		return &clouddbProc{proc: p, url: u}, nil
	case <-p.done:
		return nil, fmt.Errorf("clouddb serve exited before serving (%v); see %s:\n%s", p.err, logPath, tailFile(logPath, 20))
	case <-timer.C:
		p.kill()
		return nil, fmt.Errorf("clouddb serve printed no address within 60s; see %s", logPath)
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	}
}

// stop sends sig and waits (bounded) for the process to exit.
func (c *clouddbProc) stop(sig syscall.Signal, within time.Duration) error {
	if err := c.cmd.Process.Signal(sig); err != nil && !c.exited() {
		return err
	}
	if err := c.wait(within); err != nil {
		c.kill()
		return err
	}
	return nil
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// vmRSS is VmRSS of a process, in bytes.
func vmRSS(pid int) (int64, error) {
	return procField("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS:")
}

// pss is the proportional set size of a process, in bytes.
func pss(pid int) (int64, error) {
	return procField("/proc/"+strconv.Itoa(pid)+"/smaps_rollup", "Pss:")
}

// cpuTime is the user plus system CPU time a process has used so far.
func cpuTime(pid int) (time.Duration, error) { return statTicks(pid, 2) }

// cpuTimeWithChildren is cpuTime with its reaped children's.
func cpuTimeWithChildren(pid int) (time.Duration, error) { return statTicks(pid, 4) }

// statTicks sums n of a process's CPU times from /proc/PID/stat, from utime on (utime,
// stime, cutime, cstime: fields 14 to 17; field 3, the state, is the first after the
// parenthesised command name).
func statTicks(pid, n int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 11+n {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	var ticks int64
	for _, s := range f[11 : 11+n] {
		t, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: bad CPU times", pid)
		}
		ticks += t
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// procField reads a "Name:   123 kB" line of a /proc file.
func procField(path, name string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == name {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", path, name, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no %s line", path, name)
}

// buildClouddb builds the clouddb binary of this module into dir.
func buildClouddb(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "clouddb")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "clouddb/cmd/clouddb")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build clouddb/cmd/clouddb: %w\n%s", err, out)
	}
	return bin, nil
}
