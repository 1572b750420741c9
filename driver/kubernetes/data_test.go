package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"clouddb"
)

// TestData: a backup (Snapshot) of one database loads into another (Load), a live copy
// (CopyFrom) replaces its data, and a file that is corrupt or too large leaves the data
// as it was.
func TestData(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	src, dst := instance(t, 301, "none"), instance(t, 302, "aof-every-1-second")
	for _, in := range []clouddb.Instance{src, dst} {
		t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
		ensureRunning(t, ctx, d, in)
	}
	s := connect(t, d, src, "", src.Password)
	reachable(t, ctx, s)
	for k, v := range map[string]string{"a": "1", "b": "2"} {
		if err := s.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set(ctx, "ttl", "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RPush(ctx, "list", "x", "y", "z").Err(); err != nil {
		t.Fatal(err)
	}

	var rdb bytes.Buffer
	n, err := d.Snapshot(ctx, src, 0, &rdb)
	if err != nil || n != int64(rdb.Len()) || !bytes.HasPrefix(rdb.Bytes(), []byte("REDIS")) {
		t.Fatalf("Snapshot = %d, %v; %d bytes starting %q", n, err, rdb.Len(), rdb.Bytes()[:min(5, rdb.Len())])
	}
	if _, err := d.Snapshot(ctx, src, 1, &rdb); err == nil {
		t.Fatal("Snapshot of shard 1 of a one-shard database succeeded")
	}
	file := filepath.Join(t.TempDir(), "backup.rdb")
	if err := os.WriteFile(file, rdb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	c := connect(t, d, dst, "", dst.Password)
	reachable(t, ctx, c)
	if err := c.Set(ctx, "old", "gone after the load", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.Load(ctx, dst, []string{file}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	keys := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		ks, err := c.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			if k == "list" {
				l, err := c.LRange(ctx, k, 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				out[k] = string(bytes.Join([][]byte{[]byte(l[0]), []byte(l[1]), []byte(l[2])}, nil))
				continue
			}
			v, err := c.Get(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		return out
	}
	want := map[string]string{"a": "1", "b": "2", "ttl": "x", "list": "xyz"}
	if got := keys(); !equal(got, want) {
		t.Fatalf("keys after Load = %v, want %v", got, want)
	}
	if ttl, err := c.TTL(ctx, "ttl").Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL after Load = %v, %v", ttl, err)
	}

	// A corrupt file, and data larger than the limit: refused, the data as it was.
	bad := filepath.Join(t.TempDir(), "bad.rdb")
	corrupt := bytes.Clone(rdb.Bytes())
	corrupt[len(corrupt)/2] ^= 0xff
	if err := os.WriteFile(bad, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Load(ctx, dst, []string{bad}); !errors.Is(err, clouddb.ErrDataCorrupt) {
		t.Fatalf("Load of a corrupt file = %v, want ErrDataCorrupt", err)
	}
	small := dst
	small.MaxMemoryBytes = 1 << 10
	if err := d.Load(ctx, small, []string{file}); !errors.Is(err, clouddb.ErrDataTooLarge) {
		t.Fatalf("Load into 1 KiB = %v, want ErrDataTooLarge", err)
	}
	if got := keys(); !equal(got, want) {
		t.Fatalf("keys after refused loads = %v, want %v", got, want)
	}

	// A live copy, through the source's public endpoint with its tenant's password.
	if err := s.Set(ctx, "a", "changed", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Del(ctx, "b").Err(); err != nil {
		t.Fatal(err)
	}
	// With a wrong password the source is no database of clouddb's, and refuses it.
	if err := d.CopyFrom(ctx, dst, clouddb.RedisEndpoint{Addr: d.PublicEndpoint(src.Port), Password: "wrong-password"}); err == nil {
		t.Fatal("CopyFrom with a wrong password succeeded")
	}
	if err := d.CopyFrom(ctx, dst, clouddb.RedisEndpoint{Addr: d.PublicEndpoint(src.Port), Password: src.Password}); err != nil {
		t.Fatalf("CopyFrom: %v", err)
	}
	want = map[string]string{"a": "changed", "ttl": "x", "list": "xyz"}
	if got := keys(); !equal(got, want) {
		t.Fatalf("keys after CopyFrom = %v, want %v", got, want)
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
