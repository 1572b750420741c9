package kubernetes

import (
	"strings"
	"testing"

	"clouddb"
	"clouddb/internal/redisconf"
)

// The config gives the tenant what driver/local does (the same rules, from
// internal/redisconf), and no value can inject a directive.
func TestRenderConfig(t *testing.T) {
	in := clouddb.Instance{
		DatabaseID: 7, Password: "p w\nrequirepass x", MaxMemoryBytes: 100 << 20, EvictionPolicy: "allkeys-lru",
		DataPersistence: "aof-every-write", Users: []clouddb.DatabaseUser{{Name: "alice", Password: "secret-1", Rule: "+@read ~*"}},
	}
	b, err := renderConfig(in, "internal-secret")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, want := range []string{
		"\nuser \"default\" \"reset\" \"on\" \">p\\x20w\\x0arequirepass\\x20x\" \"~*\" \"&*\" \"+@all\" \"-@admin\" \"-migrate\"",
		"\nuser \"clouddb-internal\" \"reset\" \"on\" \">internal-secret\" \"~*\" \"&*\" \"+@all\"\n",
		"\nuser \"alice\" \"reset\" \"on\" \"#" + redisconf.PasswordHash("secret-1") + "\" \"allchannels\" \"+@read\" \"~*\" \"-@admin\"",
		"\nmaxmemory \"104857600\"\n", "\nmaxmemory-policy \"allkeys-lru\"\n", "\nmaxmemory-clients \"67108864\"\n",
		"\nappendonly \"yes\"\n", "\nappendfsync \"always\"\n", "\nsave \"\"\n",
		"\nport \"6379\"\n", "\ndir \"/data\"\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
	for _, line := range strings.Split(conf, "\n") {
		if strings.HasPrefix(line, "requirepass") || strings.Contains(line, "secret-1") {
			t.Errorf("line %q: an injected directive or a user's password in clear", line)
		}
	}
	if _, err := renderConfig(clouddb.Instance{DataPersistence: "sometimes"}, "x"); err == nil {
		t.Error("an unknown persistence was rendered")
	}
}

func TestMemoryLimit(t *testing.T) {
	for _, m := range []int64{1 << 20, 100 << 20, 10 << 30} {
		// Room for the client buffers and the scripts (a quarter each, 64 MiB at least).
		if l := memoryLimit(m); l < m+2*max(64<<20, m/4) {
			t.Errorf("memoryLimit(%d) = %d: too little headroom", m, l)
		}
	}
}
