//go:build linux

// The UI test drives Debian's chromium (Linux only) through playwright-core.

package browser_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/internal/uitest"
)

// uiShots keeps the UI test's screenshots in a directory instead of a temporary one:
// go test ./browser/ -run TestUIFlow -args -ui-shots=DIR
var uiShots = flag.String("ui-shots", "", "directory for TestUIFlow's screenshots (default: a temporary one)")

// uiExpect is what flow.mjs checks in the UI (its UI_EXPECT).
type uiExpect struct {
	Prefix string `json:"prefix"`
	Keys   []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"keys"`
	Hash struct {
		Name   string   `json:"name"`
		Fields []string `json:"fields"`
	} `json:"hash"`
	Stream struct {
		Name string   `json:"name"`
		IDs  []string `json:"ids"`
	} `json:"stream"`
}

// TestUIFlow runs internal/uitest/flow.mjs in a real headless chromium against the UI
// served at / of the browser listener: it registers a password-protected redis-server
// with the add form, lists, filters and opens its keys, and screenshots four pages, which
// must not be blank.
func TestUIFlow(t *testing.T) {
	t.Parallel()
	node := uitest.RequireTools(t)
	b := setup(t)
	const password = "ui-test-secret"
	srv := startRedis(t, freePort(t), "--requirepass", password)
	want := fillUIData(t, client(t, srv.addr(), password))
	expect, err := json.Marshal(want)
	require.NoError(t, err)

	shots := uitest.ShotDir(t, *uiShots)
	uitest.Run(t, node, "flow.mjs", 3*time.Minute,
		"UI_URL="+b.url,
		"REDIS_HOST=127.0.0.1",
		"REDIS_PORT="+strconv.Itoa(srv.port),
		"REDIS_PASSWORD="+password,
		"UI_EXPECT="+string(expect),
		"SHOT_DIR="+shots,
	)

	for _, name := range []string{"dbs.png", "keys.png", "hash.png", "stream.png"} {
		uitest.RequireScreenshot(t, filepath.Join(shots, name))
	}
}

// fillUIData writes a hash, a stream, a string and a list, the first three under the
// prefix the flow filters by, and returns what the flow should see.
func fillUIData(t *testing.T, rc *redis.Client) uiExpect {
	t.Helper()
	ctx := context.Background()
	var w uiExpect
	w.Prefix = "ui:"
	w.Hash.Name, w.Stream.Name = "ui:hash", "ui:stream"
	pipe := rc.Pipeline()
	for i := range 5 {
		f := fmt.Sprintf("field-%d", i)
		w.Hash.Fields = append(w.Hash.Fields, f)
		pipe.HSet(ctx, w.Hash.Name, f, fmt.Sprintf("value %d", i))
	}
	for i := range 3 {
		id := fmt.Sprintf("%d-1", 1700000000000+i)
		w.Stream.IDs = append(w.Stream.IDs, id)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: w.Stream.Name, ID: id, Values: []any{"event", fmt.Sprintf("e%d", i), "n", i}})
	}
	pipe.Set(ctx, "ui:string", "hello from the UI test", 0)
	pipe.RPush(ctx, "other:list", "a", "b", "c")
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	for _, k := range [][2]string{{w.Hash.Name, "hash"}, {w.Stream.Name, "stream"}, {"ui:string", "string"}, {"other:list", "list"}} {
		w.Keys = append(w.Keys, struct {
			Name string `json:"name"`
			Type string `json:"type"`
		}{k[0], k[1]})
	}
	return w
}
