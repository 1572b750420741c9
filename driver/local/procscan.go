package local

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

// cwdScan finds servers by their working directory (see findByCwd) with scans of /proc
// shared between callers. A scan reads every process's cwd, so its cost grows with the
// servers running; a restart that starts N stopped servers looks each one up (their pid
// files went with their clean stop), and a scan per lookup made the restart quadratic in
// N. Callers that ask while a scan runs wait for the next one instead of starting their
// own: one scan serves them all.
//
// Every answer comes from a scan that began after the question was asked, as if the
// caller had scanned itself: a server started by anyone before the call is seen.
type cwdScan struct {
	// scan lists the processes by working directory; tests replace it.
	scan func() map[string][]int

	mu      sync.Mutex
	cond    *sync.Cond
	running bool             // a scan is under way
	waiting int              // callers waiting for a scan (for tests)
	done    uint64           // scans completed
	last    map[string][]int // what the last completed scan found
}

func newCwdScan() *cwdScan {
	s := &cwdScan{scan: scanCwds}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// pids returns the pids whose working directory was dir, from a scan that began after
// the call.
func (s *cwdScan) pids(dir string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A scan under way began before this call and may have missed a server started
	// since: the one after it is needed then.
	want := s.done + 1
	if s.running {
		want++
	}
	for s.done < want {
		if s.running {
			s.waiting++
			s.cond.Wait()
			s.waiting--
			continue
		}
		s.running = true
		s.mu.Unlock()
		var found map[string][]int
		func() {
			// A panicking scan must not leave the others waiting forever.
			defer func() {
				s.mu.Lock()
				s.last = found
				s.done++
				s.running = false
				s.cond.Broadcast()
			}()
			found = s.scan()
		}()
	}
	return s.last[dir]
}

// scanCwds maps the working directory of every process it can read to its pids. Zombies
// and exited processes have no cwd and are left out.
func scanCwds() map[string][]int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	found := make(map[string][]int)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err != nil {
			continue
		}
		found[cwd] = append(found[cwd], pid)
	}
	return found
}

// findByCwd returns the pid of a redis-server whose working directory is dir, or 0.
func (d *Driver) findByCwd(dir string) int {
	for _, pid := range d.cwds.pids(dir) {
		// Checked again one by one: the scan is shared, and a process may have exited
		// (and its pid been reused) since.
		if !ours(pid, dir) {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), "redis-server") && !gone(pid) {
			return pid
		}
	}
	return 0
}
