package local_test

import (
	"clouddb"
	"fmt"
	"github.com/stretchr/testify/require"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLoadCluster_NoLeaks: an import refused (a corrupt part), one ended by Stop during
// its split and one that succeeded leave no open file, no process (checking servers) and
// no file (shard parts, the streamed copy, the servers' directories) behind.
func TestLoadCluster_NoLeaks(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	src := b.clustered(t, 1, 2, false, "none")
	clusterWrite(t, clusterClient(t, src), "new:", 200)
	parts := backupParts(t, b, src)
	data, err := os.ReadFile(parts[0])
	require.NoError(t, err)
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 0xFF
	dst := b.clustered(t, 2, 2, true, "snapshot-every-1-hour")

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	count := func() (fds, procs int, files []string) {
		ents, ferr := os.ReadDir("/proc/self/fd")
		require.NoError(t, ferr)
		procs = len(childServers(t))
		for _, dir := range []string{tmp, b.dir} {
			dents, derr := os.ReadDir(dir)
			require.NoError(t, derr)
			for _, e := range dents {
				if strings.HasPrefix(e.Name(), ".import-") || strings.HasPrefix(e.Name(), "redisdata-") {
					files = append(files, filepath.Join(dir, e.Name()))
				}
			}
		}
		return len(ents), procs, files
	}
	// A first import warms what lives on (go-redis pools, the driver's clients).
	require.NoError(t, b.driver.LoadStream(ctx, dst, strings.NewReader(string(data))))
	time.Sleep(200 * time.Millisecond)
	fds0, procs0, files0 := count()
	require.Empty(t, files0)

	err = b.driver.LoadStream(ctx, dst, strings.NewReader(string(bad)))
	require.ErrorIs(t, err, clouddb.ErrDataCorrupt)

	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- b.driver.LoadStream(ctx, dst, pr) }()
	_, err = pw.Write(data[:len(data)/2])
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // the split waits for the rest
	require.NoError(t, b.driver.Stop(ctx, dst.DatabaseID))
	require.Error(t, <-errc)
	pw.Close()
	require.NoError(t, b.driver.Ensure(ctx, dst))
	require.NoError(t, b.driver.Load(ctx, dst, parts))

	require.Eventually(t, func() bool {
		fds, procs, files := count()
		return fds <= fds0 && procs == procs0 && len(files) == 0
	}, 5*time.Second, 50*time.Millisecond, "before: %d fds, %d checking servers", fds0, procs0)
}

// childServers are the pids of this process's children that run a throwaway server
// (they run in a redisdata-* directory).
func childServers(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	me := strconv.Itoa(os.Getpid())
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat)[i+1:])
		if len(f) < 2 || f[1] != me {
			continue
		}
		// redis-server rewrites its command line (its title): its working directory
		// tells.
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if strings.Contains(cwd, "redisdata-") {
			pids = append(pids, pid)
		}
	}
	return pids
}
