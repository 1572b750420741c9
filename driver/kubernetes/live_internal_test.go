package kubernetes

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb"
	"clouddb/internal/redisconf"
)

// liveAsAsked, which Running relies on, sees a changed password, user, rule-less user
// list and default user's state, and the settings Ensure applies live; what applyLive
// applies it accepts. On a local redis-server, not a cluster.
func TestLiveAsAsked(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	const internal = "internal-secret"
	in := clouddb.Instance{
		DatabaseID: 1, Password: "pw1", MaxMemoryBytes: 64 << 20, EvictionPolicy: "volatile-lru",
		DataPersistence: "none", Shards: 1,
		Users: []clouddb.DatabaseUser{{Name: "alice", Password: "a1", Rule: "+@read ~*"}},
	}
	conf, err := renderConfig(in, internal)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(path, configHere(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Username: redisconf.InternalUser, Password: internal, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for c.Ping(ctx).Err() != nil {
		if ctx.Err() != nil {
			t.Fatal("redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	check := func(what string, in clouddb.Instance, want bool) {
		t.Helper()
		got, err := liveAsAsked(ctx, c, in)
		if err != nil || got != want {
			t.Fatalf("%s: liveAsAsked = %v, %v; want %v", what, got, err, want)
		}
	}
	check("as started", in, true)
	for what, change := range map[string]func(*clouddb.Instance){
		"another password": func(in *clouddb.Instance) { in.Password = "pw2" },
		"a user's password": func(in *clouddb.Instance) {
			in.Users = []clouddb.DatabaseUser{{Name: "alice", Password: "a2", Rule: "+@read ~*"}}
		},
		"a user more": func(in *clouddb.Instance) {
			in.Users = append(in.Users, clouddb.DatabaseUser{Name: "bob", Password: "b", Rule: "+@read ~*"})
		},
		"a user less":           func(in *clouddb.Instance) { in.Users = nil },
		"the default user off":  func(in *clouddb.Instance) { in.DefaultUserOff = true },
		"another memory limit":  func(in *clouddb.Instance) { in.MaxMemoryBytes *= 2 },
		"another policy":        func(in *clouddb.Instance) { in.EvictionPolicy = "allkeys-lru" },
		"persistence turned on": func(in *clouddb.Instance) { in.DataPersistence = "aof-every-write" },
	} {
		changed := in
		change(&changed)
		check(what, changed, false)
		d := &Driver{}
		for _, s := range liveSettings(changed) {
			if err := c.ConfigSet(ctx, s[0], s[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.applyUsers(ctx, c, changed); err != nil {
			t.Fatal(err)
		}
		check(what+", applied", changed, true)
		check(what+", applied, the instance of before", in, false)
		for _, s := range liveSettings(in) {
			if err := c.ConfigSet(ctx, s[0], s[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.applyUsers(ctx, c, in); err != nil {
			t.Fatal(err)
		}
		check(what+", undone", in, true)
	}
}
