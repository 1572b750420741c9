package kubernetes

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestWriteFilesNow: a save or AOF rewrite already running when the data was written
// (here: made slow, begun before the last write) is not taken for the one that holds it:
// writeFilesNow waits for it, has its own run, and returns once that one ended, every
// write in the files. On a local redis-server.
func TestWriteFilesNow(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	for _, aof := range []bool{false, true} {
		t.Run("aof="+strconv.FormatBool(aof), func(t *testing.T) {
			port := freePort(t)
			appendonly := "no"
			if aof {
				appendonly = "yes"
			}
			cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(), "--save", "", "--appendonly", appendonly)
			if err = cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), DisableIdentity: true, MaxRetries: -1, PoolSize: 1})
			t.Cleanup(func() { c.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for c.Ping(ctx).Err() != nil {
				if ctx.Err() != nil {
					t.Fatal("redis-server did not start")
				}
				time.Sleep(20 * time.Millisecond)
			}
			for i := range 100 {
				if err = c.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			count := "rdb_saves"
			if aof {
				count = "aof_rewrites"
			}
			counted := func() int {
				t.Helper()
				info, ierr := c.Info(ctx, "persistence").Result()
				if ierr != nil {
					t.Fatal(ierr)
				}
				n, _ := strconv.Atoi(infoField(info, count))
				return n
			}
			before := counted()
			// A slow one (5 ms a key: half a second), then a write it does not hold.
			if err = c.ConfigSet(ctx, "rdb-key-save-delay", "5000").Err(); err != nil {
				t.Fatal(err)
			}
			first := "bgsave"
			if aof {
				first = "bgrewriteaof"
			}
			if err = c.Do(ctx, first).Err(); err != nil {
				t.Fatal(err)
			}
			if err = c.Set(ctx, "after", 1, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err = writeFilesNow(ctx, c, aof); err != nil {
				t.Fatalf("writeFilesNow: %v", err)
			}
			if n := counted(); n != before+2 {
				t.Fatalf("%s went from %d to %d when writeFilesNow returned: want the running one and its own", count, before, n)
			}
			if !aof {
				info := c.Info(ctx, "persistence").Val()
				if got := infoField(info, "rdb_changes_since_last_save"); got != "0" {
					t.Fatalf("rdb_changes_since_last_save = %s after writeFilesNow, want 0 (the last write saved)", got)
				}
			}
		})
	}
}
