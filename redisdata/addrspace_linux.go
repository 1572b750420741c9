package redisdata

import (
	"errors"

	"golang.org/x/sys/unix"
)

// CapAddressSpace caps the address space of the redis-server pid that loads a file for
// a database of maxMemory bytes (nothing when maxMemory is 0) at what such a database
// needs, with room to spare (AddressSpaceFor). Its memory use, watched or measured, is
// seen only between two reads of the file, and one value that LZF packed about 90 times
// smaller is unpacked at once: a file of a few megabytes becomes gigabytes before
// anyone sees them. Under the cap the allocation fails, and the server refuses the file
// instead of taking the machine's memory.
//
// Only the soft limit is set, so that LiftAddressSpace can take it away again. The
// server is capped as soon as it has started: it reads its file only once its
// initialisation, much longer than this call, is done.
func CapAddressSpace(pid int, maxMemory int64) error {
	if maxMemory <= 0 {
		return nil
	}
	var old unix.Rlimit
	err := unix.Prlimit(pid, unix.RLIMIT_AS, nil, &old)
	if err == nil {
		limit := AddressSpaceFor(maxMemory)
		if limit >= old.Max {
			return nil
		}
		err = unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: old.Max}, nil)
	}
	if errors.Is(err, unix.ESRCH) {
		// Gone already (a file it refused at once): nothing to cap, and the caller
		// learns from its exit why it went.
		return nil
	}
	return err
}

// LiftAddressSpace gives the server pid, which may have been capped by CapAddressSpace,
// the address space it had before: the caller's own soft limit, which it inherited.
func LiftAddressSpace(pid int) error {
	var own, old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &own); err != nil {
		return err
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, nil, &old); err != nil {
		return err
	}
	want := min(own.Cur, old.Max)
	if old.Cur == want {
		return nil
	}
	return unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: want, Max: old.Max}, nil)
}
