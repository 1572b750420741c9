package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// fileLock is an exclusive flock(2) on a file: the kernel releases it when its holder
// exits, however it ends, and two opens of one file conflict even within one process.
type fileLock struct{ f *os.File }

// tryLock takes the lock on path without waiting; ok is false when another holds it.
func tryLock(path string) (l *fileLock, ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return &fileLock{f}, true, nil
}

// lockFile waits until it holds the lock on path, or ctx ends. It polls rather than
// blocks in flock, so that the wait can end with ctx.
func lockFile(ctx context.Context, path string) (*fileLock, error) {
	for {
		l, ok, err := tryLock(path)
		if err != nil || ok {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *fileLock) unlock() { l.f.Close() }

// makeTempDir makes this process's directory for the files imports download, under
// parent, and removes those whose process is gone (a crash leaves them): each directory
// holds a lock file that its process keeps locked while it runs. release removes the
// directory and frees its lock.
func makeTempDir(parent string) (dir string, release func(), err error) {
	entries, err := os.ReadDir(parent)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	for _, e := range entries {
		old := filepath.Join(parent, e.Name())
		l, ok, lockErr := tryLock(filepath.Join(old, ".lock"))
		if lockErr != nil && !errors.Is(lockErr, fs.ErrNotExist) && !errors.Is(lockErr, syscall.ENOTDIR) {
			return "", nil, lockErr
		}
		if ok || lockErr != nil { // unlocked: its process is gone; no lock file: not one of ours
			if rmErr := os.RemoveAll(old); rmErr != nil {
				if l != nil {
					l.unlock()
				}
				return "", nil, rmErr
			}
		}
		if l != nil {
			l.unlock()
		}
	}
	if mkErr := os.MkdirAll(parent, 0o700); mkErr != nil {
		return "", nil, mkErr
	}
	if dir, err = os.MkdirTemp(parent, "import-"); err != nil {
		return "", nil, err
	}
	l, ok, err := tryLock(filepath.Join(dir, ".lock"))
	if err != nil || !ok {
		_ = os.RemoveAll(dir)
		if err == nil {
			err = errors.New("held by another process")
		}
		return "", nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return dir, func() { os.RemoveAll(dir); l.unlock() }, nil
}
