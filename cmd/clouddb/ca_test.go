package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCAEndNotice: nothing while the CA ends more than caEndWarnBefore away, a warning
// from then on, an error once it has ended.
func TestCAEndNotice(t *testing.T) {
	end := time.Date(2035, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		now   time.Time
		ok    bool
		level slog.Level
	}{
		{"a year before", end.AddDate(-1, 0, 0), false, 0},
		{"a second more than 90 days before", end.Add(-caEndWarnBefore - time.Second), false, 0},
		{"90 days before", end.Add(-caEndWarnBefore), true, slog.LevelWarn},
		{"10 days before", end.Add(-10 * 24 * time.Hour), true, slog.LevelWarn},
		{"at its end", end, true, slog.LevelWarn},
		{"a second after", end.Add(time.Second), true, slog.LevelError},
		{"a year after", end.AddDate(1, 0, 0), true, slog.LevelError},
	} {
		level, msg, ok := caEndNotice(end, c.now)
		require.Equal(t, c.ok, ok, c.name)
		require.Equal(t, c.level, level, c.name)
		require.Equal(t, c.ok, msg != "", c.name)
	}
	_, msg, _ := caEndNotice(end, end.Add(-time.Hour))
	require.Contains(t, msg, "no certificate it issues can outlive it")
	_, msg, _ = caEndNotice(end, end.Add(time.Hour))
	require.Contains(t, msg, "has ended")
}

// TestWatchCAEnd: serve's watch logs at once, saying when the CA ends and in how many
// days; a CA far from its end gets no line.
func TestWatchCAEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one pass: the daily ones are the same call
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	end := time.Now().Add(10*24*time.Hour + time.Hour).Truncate(time.Second)
	watchCAEnd(ctx, log, end)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1, out.String())
	require.Contains(t, lines[0], "level=WARN")
	require.Contains(t, lines[0], "ca_not_after="+end.UTC().Format(time.RFC3339))
	require.Contains(t, lines[0], "days_left=10")

	out.Reset()
	watchCAEnd(ctx, log, time.Now().Add(-time.Hour))
	require.Contains(t, out.String(), "level=ERROR")
	require.NotContains(t, out.String(), "days_left")

	out.Reset()
	watchCAEnd(ctx, log, time.Now().Add(caEndWarnBefore+time.Hour))
	require.Empty(t, out.String())
}
