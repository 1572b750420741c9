package local

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Quiet servers' logs hold no read buffer each (32 KiB a server, a thousand servers);
// what they write still all reaches their log, a burst larger than a buffer included,
// and each copy ends when its pipe does. Not parallel: the heap is measured.
func TestKeepLog_QuietPipesHoldNoBuffer(t *testing.T) {
	dir := t.TempDir()
	const n = 200
	writers := make([]*os.File, n)
	done := make([]chan struct{}, n)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		pr, pw, err := os.Pipe()
		require.NoError(t, err)
		writers[i], done[i] = pw, make(chan struct{})
		go func() {
			defer close(done[i])
			keepLog(filepath.Join(dir, strconv.Itoa(i)+".log"), pr)
		}()
		_, err = pw.Write([]byte("Ready to accept connections\n"))
		require.NoError(t, err)
	}
	// Each copy has read its line once and waits for more.
	require.Eventually(t, func() bool {
		for i := range n {
			if data, _ := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)+".log")); len(data) == 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	require.Less(t, grown, int64(n*logChunk/4), "the heap grew by %d bytes for %d quiet logs", grown, n)

	big := bytes.Repeat([]byte("0123456789abcde\n"), 3*logChunk/16)
	_, err := writers[0].Write(big)
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, writers[i].Close())
		<-done[i]
	}
	data, err := os.ReadFile(filepath.Join(dir, "0.log"))
	require.NoError(t, err)
	require.Equal(t, append([]byte("Ready to accept connections\n"), big...), data)
}

// The log's copy says once when the server logged that it accepts connections, and not
// before.
func TestKeepLogReady(t *testing.T) {
	t.Parallel()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	ready := make(chan struct{}, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		keepLogReady(filepath.Join(t.TempDir(), logFile), pr, func() { ready <- struct{}{} })
	}()
	_, err = pw.Write([]byte("1:M * Server initialized\n"))
	require.NoError(t, err)
	_, err = pw.Write([]byte("1:M * Ready to accept connections\n1:M * Ready to accept connections tcp\n"))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	<-done
	require.Len(t, ready, 1)
}
