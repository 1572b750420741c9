package local

import (
	"golang.org/x/sys/unix"

	"clouddb"
)

// watchExit has exited called once process pid, a server this Driver adopted rather than
// started, has exited, so that a supervisor hears of it at once, as it does of its own
// children: a failover must not wait for the next check. A pidfd becomes readable when
// its process exits; one goroutine waits on all of them (epoll), not a thread each.
// Without pidfds (a kernel before 5.3) the next check finds the death.
func (d *Driver) watchExit(id, pid int) {
	if d.exited == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.children[pid] != nil {
		return // reaped by spawn's goroutine, which tells
	}
	for _, w := range d.watched {
		if w.pid == pid {
			return
		}
	}
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
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(fd)}
	if err := unix.EpollCtl(d.epoll, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return
	}
	d.watched[fd] = watchedPid{id: id, pid: pid}
}

// waitExits reports the exits of the watched processes, for the life of the process.
func (d *Driver) waitExits(ep int) {
	// A panic here would end clouddb for every tenant: the watch ends instead, and the
	// reconciler's checks find exits (as they do without pidfds).
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			d.log.Error("the watch of adopted servers' exits panicked; the next checks find them", "panic", p.Value, "stack", string(p.Stack))
		}
	}()
	events := make([]unix.EpollEvent, 16)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			d.log.Warn("cannot watch adopted servers' exits any more; the next check finds them", "error", err)
			return
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			d.mu.Lock()
			w, ok := d.watched[fd]
			delete(d.watched, fd)
			d.mu.Unlock()
			_ = unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, fd, nil)
			unix.Close(fd)
			if ok {
				d.log.Info("adopted redis-server exited", keyDatabase, w.id, keyPid, w.pid)
				d.exited(w.id)
			}
		}
	}
}

// watchedPid is a watched server: its database and pid.
type watchedPid struct{ id, pid int }
