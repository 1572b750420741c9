package metrics

import (
	"net/http"
	"strconv"
	"time"
)

// UnmatchedRoute is the route label of a request no route of the cloud API took: its
// raw path would let any client make new series.
const UnmatchedRoute = "unmatched"

// InstrumentRoutes counts and times the requests api serves. The route is the pattern of
// the cloud API's ServeMux, which sets it on the very request it is handed (the cloud
// API passes its request to its mux unchanged), so it is read once api returns.
func (m *Metrics) InstrumentRoutes(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The listener's own mux set its pattern ("/"), which is not a route of the API.
		r.Pattern = ""
		rec := &statusRecorder{ResponseWriter: w}
		api.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = UnmatchedRoute
		}
		code := strconv.Itoa(rec.status())
		method := knownMethod(r.Method)
		m.requests.WithLabelValues(route, method, code).Inc()
		m.requestDuration.WithLabelValues(route, method, code).Observe(time.Since(start).Seconds())
	})
}

// knownMethod bounds the method label: a client may send any token as a method.
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	// 1xx are interim answers: the final one comes after.
	if s.code == 0 && code >= 200 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer (to flush, to set
// deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// status is the code the client got: 200 when the handler wrote nothing at all.
func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}
