package local

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"clouddb"
)

var _ clouddb.StatsReader = (*Driver)(nil)

// Stats reads the database's figures from INFO on its primaries, as its internal user
// through the unix socket (see dialServer). It takes no lock of the database: it only
// reads, and a metrics round must not wait behind a long Ensure. It reads pid files but
// never removes a stale one (livePid does, under the lock): a server whose pid file does
// not name the process that answers is reported as an error.
//
// A database with a replica counts its primary alone; a cluster sums its shards'
// primaries (the node of each shard that answers as a master), and fails if a shard has
// none.
func (d *Driver) Stats(ctx context.Context, in clouddb.Instance) (clouddb.DatabaseStats, error) {
	topo, err := d.readTopology(in.DatabaseID)
	if err != nil {
		return clouddb.DatabaseStats{}, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	if topo.Shards == 0 {
		s, _, err := d.nodeStats(ctx, d.nodeOf(in.DatabaseID, topo.Primary), in.Port)
		return s, err
	}
	var sum clouddb.DatabaseStats
	for s := range topo.Shards {
		var found bool
		for _, idx := range []int{2 * s, 2*s + 1} {
			p, ok := topo.Ports[idx]
			if !ok {
				continue
			}
			st, role, err := d.nodeStats(ctx, d.nodeOf(in.DatabaseID, idx), p.Port)
			if err != nil || role != "master" {
				continue
			}
			sum.UsedMemoryBytes += st.UsedMemoryBytes
			sum.MaxMemoryBytes += st.MaxMemoryBytes
			sum.Keys += st.Keys
			sum.OpsPerSecond += st.OpsPerSecond
			sum.ConnectedClients += st.ConnectedClients
			found = true
			break
		}
		if !found {
			if ctx.Err() != nil {
				return clouddb.DatabaseStats{}, ctx.Err()
			}
			return clouddb.DatabaseStats{}, fmt.Errorf("database %d: shard %d has no primary that answers", in.DatabaseID, s)
		}
	}
	return sum, nil
}

// nodeStats reads one node's figures and its replication role. It sends one command
// after AUTH (not probe's PING and INFO server before): the server's
// instantaneous_ops_per_sec would count the reader's own commands. INFO server's
// process_id is checked as probe does, so a stranger on the port is not read.
func (d *Driver) nodeStats(ctx context.Context, n node, port int) (clouddb.DatabaseStats, string, error) {
	pid, err := d.pidOf(n)
	if err != nil {
		return clouddb.DatabaseStats{}, "", fmt.Errorf("database %d node %d: no server runs: %w", n.db, n.idx, err)
	}
	c := d.newClient(n, port, cred{internalUser, d.internalSecret(n.db)})
	defer c.Close()
	info, err := c.Info(ctx, "server", "memory", "clients", "stats", "keyspace", "replication").Result()
	if err != nil {
		return clouddb.DatabaseStats{}, "", fmt.Errorf("database %d node %d: INFO: %w", n.db, n.idx, classify(err))
	}
	if got := infoField(info, "process_id"); got != strconv.Itoa(pid) {
		return clouddb.DatabaseStats{}, "", fmt.Errorf("database %d node %d: %s is served by process %s, not redis-server pid %d", n.db, n.idx, d.internalAddr(n, port), got, pid)
	}
	s, err := parseStats(info)
	if err != nil {
		return clouddb.DatabaseStats{}, "", fmt.Errorf("database %d node %d: %w", n.db, n.idx, err)
	}
	return s, infoField(info, "role"), nil
}

// parseStats reads the figures out of an INFO reply.
func parseStats(info string) (clouddb.DatabaseStats, error) {
	var s clouddb.DatabaseStats
	ints := []struct {
		name string
		dst  *int64
	}{
		{"used_memory", &s.UsedMemoryBytes},
		{"maxmemory", &s.MaxMemoryBytes},
		{"connected_clients", &s.ConnectedClients},
	}
	for _, f := range ints {
		v, err := strconv.ParseInt(infoField(info, f.name), 10, 64)
		if err != nil {
			return clouddb.DatabaseStats{}, fmt.Errorf("INFO %s: %w", f.name, err)
		}
		*f.dst = v
	}
	ops, err := strconv.ParseFloat(infoField(info, "instantaneous_ops_per_sec"), 64)
	if err != nil {
		return clouddb.DatabaseStats{}, fmt.Errorf("INFO instantaneous_ops_per_sec: %w", err)
	}
	s.OpsPerSecond = ops
	// The connection that asked is not a client of the database.
	s.ConnectedClients = max(s.ConnectedClients-1, 0)
	// Keyspace lines: db0:keys=3,expires=0,avg_ttl=0 (none for an empty database).
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "db") {
			continue
		}
		if _, err := strconv.Atoi(name[2:]); err != nil {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "keys="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return clouddb.DatabaseStats{}, fmt.Errorf("INFO keyspace %s: %w", name, err)
				}
				s.Keys += n
			}
		}
	}
	return s, nil
}
