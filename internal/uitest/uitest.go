//go:build linux

// Package uitest runs the real-browser UI tests: a node script beside this file drives
// Debian's chromium (Linux only) through playwright-core against a UI a Go test serves.
// scripts/ensure-deps.sh test (make test-deps) installs node, chromium and
// playwright-core (npm ci in this directory).
package uitest

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/internal/syncbuf"
)

// Chromium is the browser the scripts launch.
const Chromium = "/usr/bin/chromium"

// Width and Height are the viewport the scripts set, at scale 1: the screenshots' size.
const Width, Height = 1280, 800

// InstallMessage says how to get what the tests need.
const InstallMessage = "run scripts/ensure-deps.sh test (as root it installs them; otherwise: " +
	"sudo apt-get install -y chromium nodejs npm, then npm ci in internal/uitest)"

// Dir is this directory, where the scripts and node_modules are, whatever the calling
// test's package.
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("uitest: no caller information")
	}
	return filepath.Dir(file)
}

// RequireTools fails the test, saying what to install, unless node, chromium and
// playwright-core are there; it returns node's path.
func RequireTools(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found: %s", InstallMessage)
	}
	if _, err := os.Stat(Chromium); err != nil {
		t.Fatalf("%s not found: %s", Chromium, InstallMessage)
	}
	if _, err := os.Stat(filepath.Join(Dir(), "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("playwright-core is not installed in internal/uitest: %s", InstallMessage)
	}
	return node
}

// ShotDir is dir (made if missing), or a temporary directory of the test when dir is "".
func ShotDir(t *testing.T, dir string) string {
	t.Helper()
	if dir == "" {
		return t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// Script is a node script running.
type Script struct {
	name   string
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start starts script (a file of this directory) with node and the environment env
// (beside the test's own, plus CHROMIUM); it runs for at most timeout. The test's
// cleanup kills it if it still runs.
func Start(t *testing.T, node, script string, timeout time.Duration, env ...string) *Script {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, node, filepath.Join(Dir(), script))
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env,
		"CHROMIUM="+Chromium,
		"FORCE_COLOR=0", // playwright's call logs without escape codes
	)
	s := &Script{name: script, cmd: cmd, out: &syncbuf.Buffer{}, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	// node and the chromium it launches share a process group, killed as a whole on
	// timeout; the kernel kills node if the test binary dies first (and playwright then
	// its browser).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	s.start = time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("%s: %v", script, err)
	}
	go func() {
		s.err = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything left of the group; usually gone
		close(s.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

// Done is closed when the script has ended.
func (s *Script) Done() <-chan struct{} { return s.done }

// Output is what the script wrote so far (stdout and stderr).
func (s *Script) Output() string { return s.out.String() }

// Wait waits for the script to end and fails the test with its output unless it exited
// 0; it returns the output.
func (s *Script) Wait(t *testing.T) string {
	t.Helper()
	<-s.done
	took := time.Since(s.start).Round(time.Millisecond)
	require.NoError(t, s.err, "%s (%s, ctx: %v):\n%s", s.name, took, s.ctx.Err(), s.out.String())
	t.Logf("%s in %s:\n%s", s.name, took, s.out.String())
	return s.out.String()
}

// Run runs script to its end (Start, then Wait).
func Run(t *testing.T, node, script string, timeout time.Duration, env ...string) string {
	t.Helper()
	return Start(t, node, script, timeout, env...).Wait(t)
}

// RequireScreenshot checks that path is a PNG of the viewport's size that is not blank:
// several colours, and a share of pixels other than the most common (background) one.
func RequireScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "screenshot")
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "%s", path)
	bounds := img.Bounds()
	require.Equal(t, image.Rect(0, 0, Width, Height), bounds, "%s: size", path)
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
