package local_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestLoadCluster_CheckerStoppedAtItsShare: a shard's part that needs more than its
// share of the memory limit is stopped as its checking server passes the share, as the
// swap's loading server is stopped at the limit (README: "stopped as soon as its memory
// passes the database's limit"), not loaded whole under its address-space cap (twice
// the share and 256 MB, for each shard: a tenant's small file would take gigabytes of the
// machine's memory across the shards) and refused only then.
func TestLoadCluster_CheckerStoppedAtItsShare(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 8*mb
	require.NoError(t, b.driver.Ensure(ctx, in))
	// 2 million keys of shard 0 (hash tag {b}): some 150 MB loaded, under the 264 MB
	// its checking server may map, far over its 4 MB share.
	data := []byte("REDIS0010")
	for i := range 2_000_000 {
		key := "{b}" + strconv.Itoa(i)
		data = append(data, 0x00, byte(len(key)))
		data = append(data, key...)
		data = append(data, 0xC0, byte(i))
	}
	data = append(data, 0xFF)
	tab := crc64.MakeTable(bits.Reverse64(0xad93d23594c935a9))
	data = binary.LittleEndian.AppendUint64(data, ^crc64.Update(^uint64(0), tab, data))
	file := filepath.Join(t.TempDir(), "big.rdb")
	require.NoError(t, os.WriteFile(file, data, 0o600))

	var peak atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			for _, pid := range childServers(t) {
				if rss := vmRSS(pid); rss > peak.Load() {
					peak.Store(rss)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	err := b.driver.Load(ctx, in, []string{file})
	close(stop)
	<-watched
	t.Logf("import: %v; the checking servers' peak: %d MB", err, peak.Load()>>20)
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)
	require.Less(t, peak.Load(), int64(48*mb), "the checking servers' peak resident memory")
}

// vmRSS is the resident memory of process pid in bytes (0 if it is gone).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
