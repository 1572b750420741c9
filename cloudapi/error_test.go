package cloudapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteErrorClientGone: a request whose client went away is not an internal error:
// no error line in the log, and a 499 nobody reads; an unexplained error is one.
func TestWriteErrorClientGone(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest(http.MethodGet, "/v1/subscriptions", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	writeError(w, r, logger, fmt.Errorf("list: %w", context.Canceled))
	require.Equal(t, 499, w.Code)
	require.Empty(t, logs.String())

	w = httptest.NewRecorder()
	writeError(w, httptest.NewRequest(http.MethodGet, "/v1/subscriptions", nil), logger, errors.New("disk on fire"))
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, logs.String(), "level=ERROR")
	require.NotContains(t, w.Body.String(), "disk on fire", "the cause stays in the log")
}
