package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"clouddb"
)

// child is a server this Driver started; a goroutine reaps it.
type child struct {
	dir     string        // its node's directory
	done    chan struct{} // closed once the process is reaped
	err     error         // Wait's result, set before done is closed
	logDone chan struct{} // closed once all the server's output is in its log (see keepLog)
	ready   chan struct{} // closed once the server logged that it accepts connections
}

// logWait bounds how long waitLog waits for the last lines of a server that exited: a
// child it forked (a background save) keeps the pipe open, and its lines may never come.
const logWait = time.Second

// waitLog waits, up to logWait, until the server's output is all in its log, so that
// logTail shows why it exited.
func (c *child) waitLog() {
	t := time.NewTimer(logWait)
	defer t.Stop()
	select {
	case <-c.logDone:
	case <-t.C:
	}
}

// spawn starts redis-server (the binary bin) on the config file in dir, with args after it
// (settings that override the file's), detached from clouddb: in its own
// session, so signals sent to clouddb's process group do not reach it, and not tied to a
// context, so it outlives clouddb. A goroutine reaps it so no zombie stays behind.
//
// The server logs to its stdout (logfile ""), which with its stderr is a pipe to a
// goroutine that keeps its capped log (keepLog). A server that outlives this clouddb
// loses its log lines until its next restart (see log.go); one started by an older
// clouddb, which appends to redis.log itself (logfile cannot change live), is brought in
// line at its next restart.
func (d *Driver) spawn(id int, dir, bin string, args ...string) (int, *child, error) {
	lock, err := holdLock(dir)
	if err != nil {
		return 0, nil, err
	}
	defer lock.Close() // the server has its own descriptor, which keeps the lock
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	cmd := exec.Command(bin, append([]string{filepath.Join(dir, confFile)}, args...)...)
	cmd.Dir = dir
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	pw.Close() // the server has its own copy: the pipe ends when it (and its children) exit
	if err != nil {
		pr.Close()
		return 0, nil, fmt.Errorf("start %s: %w", bin, err)
	}
	// An older clouddb kept the server's stdout and stderr apart, uncapped.
	_ = os.Remove(filepath.Join(dir, oldOutFile))
	pid := cmd.Process.Pid
	c := &child{dir: dir, done: make(chan struct{}), logDone: make(chan struct{}), ready: make(chan struct{})}
	go func() {
		defer close(c.logDone)
		keepLogReady(filepath.Join(dir, logFile), pr, func() { close(c.ready) })
	}()
	d.mu.Lock()
	d.children[pid] = c
	d.mu.Unlock()
	reap := func() {
		c.err = cmd.Wait()
		d.mu.Lock()
		delete(d.children, pid)
		d.mu.Unlock()
		d.log.Info("redis-server exited", keyDatabase, id, keyPid, pid, keyExit, exitText(c.err))
		close(c.done)
		d.tellExited(id)
	}
	// Reaped once it has exited (its pidfd says so), not by a wait that blocks a thread
	// for its whole life; the pid cannot be reused before, as the process is unreaped.
	if !d.watchPid(id, pid, dir, reap) {
		go reap()
	}
	return pid, c, nil
}

// tellExited calls Config.Exited, if set, on a goroutine of its own: the exits of every
// server, children and adopted alike, are reaped and reported by the one goroutine that
// watches them all (see watchPid), which a supervisor slow to take one report must not
// hold up (the later exits unreaped, unreported, their servers trusted by Running until
// their next deep check). A panic there is logged, not the end of clouddb.
func (d *Driver) tellExited(id int) {
	if d.exited == nil {
		return
	}
	go func() {
		defer func() {
			if p := clouddb.Recovered(recover()); p != nil {
				d.log.Error("the report of a server's exit panicked", keyDatabase, id, "panic", p.Value, "stack", string(p.Stack))
			}
		}()
		d.exited(id)
	}()
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// childOf returns the child with this pid if this Driver started it and it is not reaped.
func (d *Driver) childOf(pid int) *child {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.children[pid]
}

// ours reports whether pid is a live redis-server of the database in dir. A pid file may
// name a pid that the kernel has since given to another program; a server's working
// directory is its data directory (clouddb starts it there and redis chdirs to `dir`), so
// /proc/<pid>/cwd tells ours from a stranger. Zombies have no cwd and read as gone.
// Without /proc it answers true for any live pid; callers then rely on an authenticated
// PING whose INFO names the same pid.
func ours(pid int, dir string) bool {
	if pid <= 0 || !alive(pid) {
		return false
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		if _, serr := os.Stat("/proc/self/cwd"); serr != nil {
			return true // no procfs
		}
		return false
	}
	return cwd == dir
}

// holdLock opens the lock file of the node in dir and locks it (flock), for the server
// about to start there to inherit: the lock is the open file's, so it is held as long as
// the server (or a child it forked) runs, from before its exec, whoever started it and
// whatever became of that clouddb. Then unlocked (see lockFree) says that no server runs
// there without a /proc scan. A lock file that another process holds (a server this
// Driver did not find, such as a background save that outlived its server) is replaced:
// the caller found no server to adopt, and the new server must hold the lock.
func holdLock(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	for range 2 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("lock %s: held by another process", path)
}

// lockFree reports whether the lock file of the node in dir exists and no process holds
// it: then no server started with it (see holdLock) runs there. Without the file (a
// server started by an older clouddb, or none ever), or held, it reports false.
func lockFree(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close() // which drops the lock taken below
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// alive reports whether a process with this pid exists (a zombie counts until reaped).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// gone reports whether pid has exited: no such process, or a zombie.
func gone(pid int) bool {
	if !alive(pid) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z'
	}
	return false
}

// waitGone waits until pid has exited, up to timeout or the context's end.
func (d *Driver) waitGone(ctx context.Context, pid int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var done chan struct{}
	if c := d.childOf(pid); c != nil {
		done = c.done
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if done == nil && gone(pid) {
			return true
		}
		select {
		case <-done:
			return true
		case <-tick.C:
		case <-deadline.C:
			return gone(pid)
		case <-ctx.Done():
			return gone(pid)
		}
	}
}

// terminate sends SIGTERM (redis shuts down cleanly: it saves an RDB if save points are
// configured and flushes the AOF) and waits. Redis refuses to exit while it writes its
// first AOF, so SIGTERM is repeated; SIGKILL is the last resort after stopTimeout.
func (d *Driver) terminate(ctx context.Context, id, pid int) error {
	deadline := time.Now().Add(d.stopTimeout)
	for {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("database %d: SIGTERM to redis-server pid %d: %w", id, pid, err)
		}
		if d.waitGone(ctx, pid, time.Second) {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
	}
	d.log.Warn("redis-server did not stop on SIGTERM; killing it", keyDatabase, id, keyPid, pid)
	return d.kill(ctx, id, pid)
}

// kill sends SIGKILL and waits for the process to be gone.
func (d *Driver) kill(ctx context.Context, id, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("database %d: SIGKILL to redis-server pid %d: %w", id, pid, err)
	}
	// Not bounded by ctx: a killed process goes away promptly, and we must not report
	// it gone before it is.
	if !d.waitGone(context.WithoutCancel(ctx), pid, 5*time.Second) {
		return fmt.Errorf("database %d: redis-server pid %d still running after SIGKILL", id, pid)
	}
	return nil
}

// logTail returns the last lines of the server's log (its stdout and stderr), for error
// messages. Redis does not log its password.
func logTail(dir string) string {
	if t := tail(filepath.Join(dir, logFile), 8); t != "" {
		return logFile + ": " + t
	}
	return "(no log output)"
}

// tail returns up to n last non-empty lines of a file, joined with " | ".
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 8 << 10
	if st, statErr := f.Stat(); statErr == nil && st.Size() > max {
		if _, seekErr := f.Seek(st.Size()-max, io.SeekStart); seekErr != nil {
			return ""
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// diskNearlyFull reports whether the file system of dir has so little space left that a
// server may have failed for want of it: under 16 MiB or 1% free.
func diskNearlyFull(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	free, total := st.Bavail*uint64(st.Bsize), st.Blocks*uint64(st.Bsize)
	return free < 16<<20 || free < total/100
}
