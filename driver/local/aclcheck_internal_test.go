package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestCheckRulesOn: checkRulesOn asks the binary it is given and no other, and refuses
// as CheckACLRules does.
func TestCheckRulesOn(t *testing.T) {
	real, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	bins := map[string]string{}
	var servers []RedisBinary
	for _, v := range []string{"7.0", "7.2"} {
		bins[v] = filepath.Join(dir, "redis-server-"+v)
		script := fmt.Sprintf("#!/bin/sh\necho %s >> '%s'\nexec '%s' \"$@\"\n", v, runs, real)
		require.NoError(t, os.WriteFile(bins[v], []byte(script), 0o755))
		servers = append(servers, RedisBinary{Path: bins[v], Version: v, Full: v + ".0"})
	}
	d, err := New(Config{Dir: filepath.Join(dir, "dbs"), RedisServers: servers, StartTimeout: 10 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	require.NoError(t, d.checkRulesOn(ctx, bins["7.2"], []string{"+@read ~*", "+get ~k"}))
	err = d.checkRulesOn(ctx, bins["7.2"], []string{"+@read ~*", "+nosuch ~*"})
	e := clouddb.AsError(err)
	require.NotNil(t, e, "%v", err)
	require.Equal(t, `Invalid ACL redis rule "+nosuch ~*": Redis 7.2 refuses "+nosuch": Unknown command or category name in ACL`, e.Description)
	b, err := os.ReadFile(runs)
	require.NoError(t, err)
	require.Equal(t, []string{"7.2", "7.2"}, strings.Fields(string(b)), "only the binary given")
}
