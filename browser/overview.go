package browser

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// overviewView is a database's overview, as the tool's overview endpoint answers it, read
// from INFO. On a cluster, as the tool does: the version and mode are the first node's,
// usedMemory and totalKeys are summed over the primaries, connectedClients is the median
// over all nodes, and opsPerSecond and the network figures are summed over all nodes. A
// figure the server does not tell is left out.
type overviewView struct {
	Version string `json:"version"`
	// Mode is INFO's redis_mode: standalone, cluster or sentinel.
	Mode       string `json:"mode,omitempty"`
	ServerName string `json:"serverName,omitempty"`
	TotalKeys  *int64 `json:"totalKeys,omitempty"`
	// TotalKeysPerDb counts the keys of each logical database ("db0": n) when other
	// databases than db0 hold keys.
	TotalKeysPerDb   map[string]int64 `json:"totalKeysPerDb,omitempty"`
	UsedMemory       *int64           `json:"usedMemory,omitempty"`
	ConnectedClients *int64           `json:"connectedClients,omitempty"`
	OpsPerSecond     *int64           `json:"opsPerSecond,omitempty"`
	NetworkInKbps    *float64         `json:"networkInKbps,omitempty"`
	NetworkOutKbps   *float64         `json:"networkOutKbps,omitempty"`
}

func (s *Server) overview(r *http.Request) (int, any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), browseTimeout)
	defer cancel()
	c, d, err := s.open(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	if c.Type == typeCluster {
		v, cerr := d.clusterOverview(ctx, c)
		if cerr != nil {
			return 0, nil, cerr
		}
		return http.StatusOK, v, nil
	}
	cl := d.client(c)
	defer cl.Close()
	text, err := cl.Info(ctx).Result()
	if err != nil {
		return 0, nil, classify(err, "the database", c.UseTLS)
	}
	in := parseInfo(text)
	v := overviewOf([]map[string]string{in}, []map[string]string{in})
	perDB := map[string]int64{}
	var total int64
	for db, n := range in.keyspace() {
		perDB[db] = n
		total += n
	}
	v.TotalKeys = &total
	if perDB["db0"] != total {
		v.TotalKeysPerDb = perDB
	}
	return http.StatusOK, v, nil
}

// clusterOverview reads INFO from every node of the cluster, at the same time, and DBSIZE
// from the primaries.
func (d *dialer) clusterOverview(ctx context.Context, c *connection) (*overviewView, error) {
	seed, at, err := d.connectSeed(ctx, c)
	if err != nil {
		return nil, err
	}
	nodes, err := clusterNodes(ctx, seed, at, c.UseTLS)
	seed.Close()
	if err != nil {
		return nil, err
	}
	var (
		wg    sync.WaitGroup
		infos = make([]map[string]string, len(nodes))
		sizes = make([]int64, len(nodes))
		errs  = make([]error, len(nodes))
	)
	for i, n := range nodes {
		wg.Go(func() {
			e := endpoint{n.Host, n.Port}
			cl := redis.NewClient(d.options(e, c.Password))
			defer cl.Close()
			text, err := cl.Info(ctx).Result()
			if err == nil && n.Role == "primary" {
				sizes[i], err = cl.DBSize(ctx).Result()
			}
			if err != nil {
				errs[i] = classify(err, n.Role+" "+e.addr(), c.UseTLS)
				return
			}
			infos[i] = parseInfo(text)
		})
	}
	wg.Wait()
	if i := slices.IndexFunc(errs, func(err error) bool { return err != nil }); i >= 0 {
		return nil, errs[i]
	}
	var (
		primaries []map[string]string
		total     int64
	)
	for i, n := range nodes {
		if n.Role == "primary" {
			primaries = append(primaries, infos[i])
			total += sizes[i]
		}
	}
	v := overviewOf(infos, primaries)
	v.TotalKeys = &total
	return v, nil
}

// info is an INFO reply by field name.
type info map[string]string

func parseInfo(text string) info {
	out := info{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// keyspace reads the keys of each logical database (db0:keys=5,expires=0,avg_ttl=0).
func (in info) keyspace() map[string]int64 {
	out := map[string]int64{}
	for k, v := range in {
		if _, err := strconv.Atoi(strings.TrimPrefix(k, "db")); err != nil || !strings.HasPrefix(k, "db") {
			continue
		}
		for f := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(f, "keys="); ok {
				if keys, err := strconv.ParseInt(n, 10, 64); err == nil {
					out[k] = keys
				}
			}
		}
	}
	return out
}

// overviewOf computes the overview of nodes (all of them) and primaries (those holding
// the data), the keys aside.
func overviewOf(nodes []map[string]string, primaries []map[string]string) *overviewView {
	v := &overviewView{}
	if len(nodes) > 0 {
		v.Version, v.Mode, v.ServerName = nodes[0]["redis_version"], nodes[0]["redis_mode"], nodes[0]["server_name"]
	}
	v.UsedMemory = sumInt(primaries, "used_memory")
	v.OpsPerSecond = sumInt(nodes, "instantaneous_ops_per_sec")
	v.NetworkInKbps = sumFloat(nodes, "instantaneous_input_kbps")
	v.NetworkOutKbps = sumFloat(nodes, "instantaneous_output_kbps")
	var clients []int64
	for _, n := range nodes {
		c, err := strconv.ParseInt(n["connected_clients"], 10, 64)
		if err != nil {
			return v
		}
		clients = append(clients, c)
	}
	if len(clients) > 0 {
		v.ConnectedClients = median(clients)
	}
	return v
}

// sumInt sums an integer field over nodes; nil when a node does not tell it.
func sumInt(nodes []map[string]string, field string) *int64 {
	var sum int64
	for _, n := range nodes {
		v, err := strconv.ParseInt(n[field], 10, 64)
		if err != nil {
			return nil
		}
		sum += v
	}
	return &sum
}

// sumFloat sums a decimal field over nodes; nil when a node does not tell it.
func sumFloat(nodes []map[string]string, field string) *float64 {
	var sum float64
	for _, n := range nodes {
		v, err := strconv.ParseFloat(n[field], 64)
		if err != nil {
			return nil
		}
		sum += v
	}
	return &sum
}

// median is the median of values (the mean of the middle two for an even count, rounded
// down).
func median(values []int64) *int64 {
	slices.Sort(values)
	m := values[len(values)/2]
	if len(values)%2 == 0 {
		m = (values[len(values)/2-1] + m) / 2
	}
	return &m
}
