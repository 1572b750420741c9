package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// socketClient is a client of the server's unix socket, logged in as clouddb's internal
// user.
func socketClient(t *testing.T, sock, dbDir string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock, Username: "clouddb-internal",
		Password: internalSecret(t, dbDir), Protocol: 2, DisableIdentity: true, MaxRetries: -1, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// Every server listens on a unix socket (mode 0700), and the driver reaches its servers
// through it: with the TCP port closed, the driver still adopts, reconfigures and backs up
// the server. A deep data directory (a test's) puts the sockets under a short directory.
func TestEnsure_UnixSocket(t *testing.T) {
	t.Parallel()
	for _, short := range []bool{true, false} {
		t.Run(map[bool]string{true: "ShortDataDir", false: "DeepDataDir"}[short], func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			// Deeper than a socket path can be, as a test's temporary directory may be.
			dir := filepath.Join(t.TempDir(), strings.Repeat("d", 80))
			require.NoError(t, os.MkdirAll(dir, 0o700))
			if short {
				var err error
				dir, err = os.MkdirTemp("", "cdb")
				require.NoError(t, err)
				t.Cleanup(func() { os.RemoveAll(dir) })
				if len(dir) > 70 {
					t.Skipf("the temporary directory %s is too deep for sockets in the data directory", dir)
				}
			}
			b := &testBundle{dir: dir, driver: mustDriver(t, dir)}
			in := b.instance(t, 81, "none")
			require.NoError(t, b.driver.Ensure(ctx, in))
			dbDir := filepath.Join(dir, "81")

			sock := admin(t, dbDir, in.Port).ConfigGet(ctx, "unixsocket").Val()["unixsocket"]
			require.LessOrEqual(t, len(sock), 107)
			real, err := filepath.EvalSymlinks(dbDir)
			require.NoError(t, err)
			if short {
				require.Equal(t, filepath.Join(real, "redis.sock"), sock)
			} else {
				require.True(t, strings.HasPrefix(sock, os.TempDir()+"/clouddb-"), sock)
				require.True(t, strings.HasSuffix(sock, "/81.sock"), sock)
				di, derr := os.Lstat(filepath.Dir(sock))
				require.NoError(t, derr)
				require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
			}
			fi, err := os.Lstat(sock)
			require.NoError(t, err)
			require.NotZero(t, fi.Mode()&os.ModeSocket)
			require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

			sc := socketClient(t, sock, dbDir)
			require.NoError(t, sc.Set(ctx, "k", "v", 0).Err())
			serverPid := pid(t, b.driver, 81)
			require.NoError(t, sc.ConfigSet(ctx, "port", "0").Err())
			require.Error(t, client(t, in.Port, in.Password).Ping(ctx).Err(), "the TCP port is closed")

			// A new Driver on the same directory (clouddb restarted) finds the socket.
			d2 := mustDriver(t, dir)
			in.MaxMemoryBytes = 32 * mb
			require.NoError(t, d2.Ensure(ctx, in))
			require.Equal(t, serverPid, pid(t, d2, 81), "adopted through the socket")
			require.Equal(t, "33554432", sc.ConfigGet(ctx, "maxmemory").Val()["maxmemory"])
			require.Equal(t, "k", client(t, in.Port, in.Password).Keys(ctx, "*").Val()[0], "back on its port")
			var buf bytes.Buffer
			_, err = d2.Snapshot(ctx, in, 0, &buf)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(buf.Bytes(), []byte("REDIS")))

			require.NoError(t, d2.Remove(context.Background(), 81))
			_, err = os.Lstat(sock)
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}
