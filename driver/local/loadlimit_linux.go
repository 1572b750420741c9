package local

import (
	"golang.org/x/sys/unix"
)

// limitLoader caps the address space of the server pid that loads an import (see
// loadSwap) at what a database of maxMemory bytes needs, with room to spare: the memory
// watch (see watchLoad) sees the data only between two reads of the file, and one value
// that LZF packed about 90 times smaller is unpacked at once, a file of a few megabytes
// becoming gigabytes before the watch sees them. Under the cap, the allocation fails and
// the server refuses the file instead of taking the machine's memory.
//
// Only the soft limit is set, so that liftLoaderLimit can take it away again once the
// file is loaded. The server is capped as soon as it has started: it reads its file only
// once its initialisation, much longer than this call, is done.
func limitLoader(pid int, maxMemory int64) error {
	if maxMemory <= 0 {
		return nil
	}
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, nil, &old); err != nil {
		return err
	}
	limit := uint64(2*maxMemory + loaderSpare)
	if limit >= old.Max {
		return nil
	}
	return unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: old.Max}, nil)
}

// liftLoaderLimit gives the server pid, which may have loaded its file under
// limitLoader's cap, the address space it had before: clouddb's own soft limit, which
// it inherited. A server capped by a clouddb that crashed during the import is adopted
// by Ensure, which lifts the cap too.
func liftLoaderLimit(pid int) error {
	var own, old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &own); err != nil {
		return err
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, nil, &old); err != nil {
		return err
	}
	if old.Cur == min(own.Cur, old.Max) {
		return nil
	}
	return unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: min(own.Cur, old.Max), Max: old.Max}, nil)
}

// loaderSpare is the address space limitLoader allows beyond twice the memory limit: the
// server's own (its code, libraries, threads' stacks: about 60 MB) and the allocator's.
const loaderSpare = 256 << 20
