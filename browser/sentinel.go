package browser

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"clouddb"
)

func (s *Server) registerSentinelRoutes() {
	s.route("POST /api/redis-sentinel/get-databases", s.discoverSentinelMasters)
}

// masterGroup is a master group a sentinel monitors, as the tool's
// POST /api/redis-sentinel/get-databases lists it.
type masterGroup struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int    `json:"port"`
	// Status is "active", or "down" when the sentinel sees the master down or
	// disconnected.
	Status         string `json:"status"`
	NumberOfSlaves int    `json:"numberOfSlaves"`
	// Nodes are the sentinels that monitor the group: the one asked, then the others it
	// knows.
	Nodes []endpoint `json:"nodes"`
}

// discoverSentinelMasters lists the master groups a sentinel monitors, so that a client
// can offer them before registering one as a SENTINEL record. The sentinel is given as a
// SENTINEL record gives it (sentinelHost, sentinelPort, sentinelPassword, tls) or with
// the tool's names (host, port, password, tls); nothing is stored, not even an inline
// new pair.
func (s *Server) discoverSentinelMasters(r *http.Request) (int, any, error) {
	ctx := r.Context()
	body, err := readBody(r)
	if err != nil {
		return 0, nil, err
	}
	hostField, portField, passwordField := "sentinelHost", "sentinelPort", "sentinelPassword"
	if body.has("host") || body.has("port") || body.has("password") {
		hostField, portField, passwordField = "host", "port", "password"
	}
	c := &connection{Type: typeSentinel}
	if c.SentinelHost, err = readHost(body, hostField); err != nil {
		return 0, nil, err
	}
	if c.SentinelPort, _, err = body.integer(portField, true, 1, 65535); err != nil {
		return 0, nil, err
	}
	if c.SentinelPassword, _, err = body.str(passwordField, false); err != nil {
		return 0, nil, err
	}
	pair, err := s.readTLS(body, c)
	if err != nil {
		return 0, nil, err
	}
	if err = body.done(fmt.Sprintf(" (the sentinel is given by %s, %s, %s and tls)", hostField, portField, passwordField)); err != nil {
		return 0, nil, err
	}
	if c.CertID != 0 {
		if pair, err = s.store.certificate(ctx, c.CertID); errors.Is(err, clouddb.ErrNotFound) {
			return 0, nil, pairNotFound(c.CertID)
		} else if err != nil {
			return 0, nil, err
		}
	}
	if err = s.checkHosts(ctx, c); err != nil {
		return 0, nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	d, err := newDialer(c, pair, s.resolver)
	if err != nil {
		return 0, nil, err
	}
	at := endpoint{c.SentinelHost, c.SentinelPort}
	sc := redis.NewSentinelClient(d.options(at, c.SentinelPassword))
	defer sc.Close()
	if err = sc.Ping(ctx).Err(); err != nil {
		return 0, nil, classify(err, "the sentinel at "+at.addr(), c.UseTLS)
	}
	masters, err := sentinelMasters(ctx, sc, at, c.UseTLS)
	if err != nil {
		return 0, nil, err
	}
	for i := range masters {
		masters[i].Nodes = append([]endpoint{at}, otherSentinels(ctx, sc, masters[i].Name)...)
	}
	return http.StatusOK, masters, nil
}

// sentinelMasters asks a sentinel (SENTINEL MASTERS) for the master groups it monitors,
// by name. A server that is not a sentinel is a 424 NOT_A_SENTINEL.
func sentinelMasters(ctx context.Context, sc *redis.SentinelClient, at endpoint, useTLS bool) ([]masterGroup, error) {
	reply, err := sc.Masters(ctx).Result()
	switch {
	case err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown command"):
		return nil, failed(errNotASentinel, "%s is not a sentinel: %s", at.addr(), firstLine(err.Error()))
	case err != nil:
		return nil, classify(err, "the sentinel at "+at.addr(), useTLS)
	}
	out := make([]masterGroup, 0, len(reply))
	for _, item := range reply {
		f := replyFields(item)
		if f["name"] == "" {
			continue
		}
		port, _ := strconv.Atoi(f["port"])
		slaves, _ := strconv.Atoi(f["num-slaves"])
		status := "active"
		for flag := range strings.SplitSeq(f["flags"], ",") {
			if flag == "s_down" || flag == "o_down" || flag == "disconnected" {
				status = "down"
			}
		}
		out = append(out, masterGroup{Name: f["name"], Host: f["ip"], Port: port, Status: status, NumberOfSlaves: slaves, Nodes: []endpoint{}})
	}
	slices.SortFunc(out, func(a, b masterGroup) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// otherSentinels are the other sentinels that monitor the group name, as the sentinel sc
// knows them; none when it cannot tell.
func otherSentinels(ctx context.Context, sc *redis.SentinelClient, name string) []endpoint {
	reply, err := sc.Sentinels(ctx, name).Result()
	if err != nil {
		return nil
	}
	var out []endpoint
	for _, f := range reply {
		if port, err := strconv.Atoi(f["port"]); err == nil && f["ip"] != "" {
			out = append(out, endpoint{Host: f["ip"], Port: port})
		}
	}
	return out
}

// replyFields reads one entry of a SENTINEL MASTERS reply: a flat list of names and
// values (RESP2) or a map (RESP3).
func replyFields(item any) map[string]string {
	f := map[string]string{}
	switch v := item.(type) {
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			f[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
		}
	case map[any]any:
		for k, val := range v {
			f[fmt.Sprint(k)] = fmt.Sprint(val)
		}
	}
	return f
}

// masterNames lists the names of masters for a message: "mymaster", "other" or "none".
func masterNames(masters []masterGroup) string {
	if len(masters) == 0 {
		return "none"
	}
	names := make([]string, len(masters))
	for i, m := range masters {
		names[i] = strconv.Quote(m.Name)
	}
	return strings.Join(names, ", ")
}

// unknownMaster is the 404 of a sentinel master group that the sentinel does not monitor,
// as the tool answers it, with the groups it does monitor.
func unknownMaster(ctx context.Context, sc *redis.SentinelClient, at endpoint, name string, useTLS bool) error {
	masters, err := sentinelMasters(ctx, sc, at, useTLS)
	if err != nil {
		return err
	}
	return fieldErr(http.StatusNotFound, errSentinelMasterUnknown, "sentinelMaster.serviceName",
		"Master group with this name doesn't exist: the sentinel at %s monitors no master named %q; it monitors %s",
		at.addr(), name, masterNames(masters))
}
