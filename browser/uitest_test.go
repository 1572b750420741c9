//go:build linux

// The UI test drives Debian's chromium (Linux only) through playwright-core.

package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The UI flow's browser and script: scripts/ensure-deps.sh test (make test-deps)
// installs them.
const (
	uiChromium   = "/usr/bin/chromium"
	uiFlowDir    = "../internal/uitest"
	uiInstallMsg = "run scripts/ensure-deps.sh test (as root it installs them; otherwise: " +
		"sudo apt-get install -y chromium nodejs npm, then npm ci in internal/uitest)"
	uiWidth, uiHeight = 1280, 800 // the viewport flow.mjs sets, at scale 1
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
	node := requireUITools(t)
	b := setup(t)
	const password = "ui-test-secret"
	srv := startRedis(t, freePort(t), "--requirepass", password)
	want := fillUIData(t, client(t, srv.addr(), password))
	expect, err := json.Marshal(want)
	require.NoError(t, err)

	shots := *uiShots
	if shots == "" {
		shots = t.TempDir()
	} else {
		require.NoError(t, os.MkdirAll(shots, 0o755))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(uiFlowDir, "flow.mjs"))
	cmd.Env = append(os.Environ(),
		"UI_URL="+b.url,
		"REDIS_HOST=127.0.0.1",
		"REDIS_PORT="+strconv.Itoa(srv.port),
		"REDIS_PASSWORD="+password,
		"UI_EXPECT="+string(expect),
		"SHOT_DIR="+shots,
		"CHROMIUM="+uiChromium,
		"FORCE_COLOR=0", // playwright's call logs without escape codes
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// node and the chromium it launches share a process group, killed as a whole on
	// timeout; the kernel kills node if the test binary dies first (and playwright then
	// its browser).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything left of the group; usually gone
	}
	require.NoError(t, err, "flow.mjs (%s, ctx: %v):\n%s", time.Since(start).Round(time.Millisecond), ctx.Err(), out.String())
	t.Logf("flow.mjs in %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())

	for _, name := range []string{"dbs.png", "keys.png", "hash.png", "stream.png"} {
		requireScreenshot(t, filepath.Join(shots, name))
	}
}

// requireUITools fails the test, saying what to install, unless node, chromium and
// playwright-core are there; it returns node's path.
func requireUITools(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found: %s", uiInstallMsg)
	}
	if _, err := os.Stat(uiChromium); err != nil {
		t.Fatalf("%s not found: %s", uiChromium, uiInstallMsg)
	}
	if _, err := os.Stat(filepath.Join(uiFlowDir, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("playwright-core is not installed in internal/uitest: %s", uiInstallMsg)
	}
	return node
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

// requireScreenshot checks that path is a PNG of the viewport's size that is not blank:
// several colours, and a share of pixels other than the most common (background) one.
func requireScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "screenshot")
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "%s", path)
	bounds := img.Bounds()
	require.Equal(t, image.Rect(0, 0, uiWidth, uiHeight), bounds, "%s: size", path)
	counts := map[uint32]int{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			counts[r>>8<<16|g>>8<<8|b>>8]++
		}
	}
	background := 0
	for _, n := range counts {
		background = max(background, n)
	}
	total := bounds.Dx() * bounds.Dy()
	share := float64(total-background) / float64(total)
	t.Logf("%s: %dx%d, %d colours, %.1f%% non-background", filepath.Base(path), bounds.Dx(), bounds.Dy(), len(counts), 100*share)
	// Anti-aliased text alone gives hundreds of colours; the pages' navigation bar alone
	// is about 5% of the pixels.
	require.GreaterOrEqual(t, len(counts), 64, "%s: too few colours: blank?", path)
	require.GreaterOrEqual(t, share, 0.08, "%s: almost all background: blank?", path)
}
