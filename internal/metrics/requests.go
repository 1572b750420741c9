package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
		s := m.series(route, knownMethod(r.Method), rec.status())
		s.count.Inc()
		s.duration.Observe(time.Since(start).Seconds())
	})
}

// seriesKey names one series of the request metrics.
type seriesKey struct {
	route, method string
	code          int
}

// requestSeries are the counter and the histogram of one seriesKey.
type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// series returns the metrics of one route, method and code, remembered after the first
// request: the vectors' own lookup hashes the labels and formats the code every time.
// The keys are bounded as the labels are (routes, known methods, status codes).
func (m *Metrics) series(route, method string, code int) *requestSeries {
	k := seriesKey{route, method, code}
	if s, ok := m.requestSeries.Load(k); ok {
		return s.(*requestSeries)
	}
	c := strconv.Itoa(code)
	s, _ := m.requestSeries.LoadOrStore(k, &requestSeries{
		count:    m.requests.WithLabelValues(route, method, c),
		duration: m.requestDuration.WithLabelValues(route, method, c),
	})
	return s.(*requestSeries)
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
