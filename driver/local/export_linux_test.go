package local

// StopWatchingExits ends the watch of the servers' exits as a failure of its epoll
// instance, or a panic of its goroutine, does (see waitExits).
func (d *Driver) StopWatchingExits() { d.stopWatching() }
