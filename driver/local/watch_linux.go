package local

import (
	"golang.org/x/sys/unix"

	"clouddb"
)

// watchExit has exited called once process pid, a server this Driver adopted rather than
// started, has exited, so that a supervisor hears of it at once, as it does of its own
// children: a failover must not wait for the next check. Without pidfds (a kernel before
// 5.3) the next check finds the death.
func (d *Driver) watchExit(n node, pid int) {
	id := n.db
	if d.exited == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.children[pid] != nil {
		return // reaped by spawn's watch, which tells
	}
	if _, ok := d.watching[pid]; ok {
		return
	}
	d.watchLocked(id, pid, n.dir, true, func() {
		d.log.Info("adopted redis-server exited", keyDatabase, id, keyPid, pid)
		d.tellExited(id)
	})
}

// watchPid has gone called once process pid has exited, on the watching goroutine (it
// must not block: Config.Exited is called on a goroutine of its own, see tellExited); it
// reports false when it cannot watch (no pidfds), and the caller waits otherwise.
//
// A pidfd becomes readable when its process exits; one goroutine waits on all of them
// (epoll). A thread blocked in wait(2) per server, as os/exec's Wait is, cost a thread
// and its stacks per database: tens of MiB at a thousand.
func (d *Driver) watchPid(id, pid int, dir string, gone func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.watchLocked(id, pid, dir, false, gone)
}

// watchLocked is watchPid with d.mu held; onExit runs on the watching goroutine. A
// process that is not this Driver's child (adopted) is watched only if, once its pidfd
// is open (which pins the process), it is still the server of the node in dir: its pid
// was checked before, and a server that died since may have left it to another process,
// which Running would then trust as the node's server.
func (d *Driver) watchLocked(id, pid int, dir string, adopted bool, onExit func()) bool {
	if d.epoll == 0 {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			d.epoll = -1
		} else {
			d.epoll = ep
			go d.waitExits(ep)
		}
	}
	if d.epoll < 0 {
		return false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	if adopted && !ours(pid, dir) {
		unix.Close(fd)
		return false
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(fd)}
	if err := unix.EpollCtl(d.epoll, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return false
	}
	d.watched[fd] = watchedPid{id: id, pid: pid, dir: dir, onExit: onExit}
	d.watching[pid] = fd
	return true
}

// waitExits reports the exits of the watched processes, for the life of the process.
func (d *Driver) waitExits(ep int) {
	// The watch ends only with this goroutine (stopWatching set d.epoll to -1, so none is
	// made again): nothing uses ep after it.
	defer unix.Close(ep)
	// A panic here would end clouddb for every tenant: the watch ends instead, and the
	// reconciler's checks find exits (as they do without pidfds).
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			d.log.Error("the watch of servers' exits panicked; the next checks find them", "panic", p.Value, "stack", string(p.Stack))
			d.stopWatching()
		}
	}()
	events := make([]unix.EpollEvent, 16)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			d.log.Warn("cannot watch servers' exits any more; the next check finds them", "error", err)
			d.stopWatching()
			return
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			d.mu.Lock()
			w, ok := d.watched[fd]
			delete(d.watched, fd)
			if ok {
				delete(d.watching, w.pid)
			}
			d.mu.Unlock()
			_ = unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, fd, nil)
			unix.Close(fd)
			if ok {
				w.onExit()
			}
		}
	}
}

// stopWatching hands the watched children back to a wait of their own each, once the
// watch ended: a child left unreaped would never be reported gone (nor its zombie go).
func (d *Driver) stopWatching() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for fd, w := range d.watched {
		if d.children[w.pid] != nil {
			go w.onExit() // its reaper waits for the exit itself
		}
		delete(d.watched, fd)
		delete(d.watching, w.pid)
		unix.Close(fd)
	}
	d.epoll = -1
}

// watchedPid is a watched process: its database, its pid, its node's directory, and
// what its exit runs.
type watchedPid struct {
	id, pid int
	dir     string
	onExit  func()
}
