package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb/redisdata"

	"clouddb"
	"clouddb/internal/backoff"
)

// An OSS Cluster database (Instance.OSSCluster) is a Redis Cluster: shard s is served by
// node 2s, and with replication by node 2s+1 as well, each a redis-server with
// cluster-enabled and its own client port and cluster bus port. Node 0 listens on the
// database's port, the endpoint a client starts from: it answers CLUSTER SLOTS and
// CLUSTER SHARDS with every node's address, which clients then use directly (there is no
// proxy). The other ports are the driver's to choose (free ports of the host, outside
// the range the store hands out) and are kept in the topology file, so that a node
// restarts where the cluster knows it. Which node of a shard is its primary is the
// cluster's to say; when a primary's process dies, the driver makes its replica take
// over (CLUSTER FAILOVER TAKEOVER) before it starts the dead node again, which then
// rejoins as a replica.

// clusterFile is where a cluster node keeps its view of the cluster, in its directory.
const clusterFile = "nodes.conf"

// clusterNodeTimeout (milliseconds) is how long a node may not answer before the others
// mark it failed. Replicas never fail over on their own (cluster-replica-no-failover):
// clouddb fails a shard over when its primary's process is gone, or when it stopped a
// primary that hung (errStopped), so a tenant's slow command cannot move a shard. A
// started primary also waits this long (500 ms at least) before it serves, so it is kept
// short: a new cluster is ok in about 2 s (redis' own delay before a new primary takes
// writes).
const clusterNodeTimeout = 1000

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// clusterWait bounds the wait for the cluster to agree (meets, slots, replicas).
const clusterWait = 15 * time.Second

// clusterPorts are a cluster node's client and bus ports.
type clusterPorts struct {
	Port int `json:"port"`
	Bus  int `json:"bus"`
}

// slotRange is the range of slots shard s of n serves.
func slotRange(s, n int) (lo, hi int) {
	return s * clusterSlots / n, (s+1)*clusterSlots/n - 1
}

// clusterNodes lists the node indexes an instance runs: 2s for each shard s, and 2s+1
// with replication.
func clusterNodes(in clouddb.Instance) []int {
	var out []int
	for s := range in.Shards {
		out = append(out, 2*s)
		if in.Replication {
			out = append(out, 2*s+1)
		}
	}
	return out
}

// clusterServer is what node idx of a cluster runs.
func (d *Driver) clusterServer(in clouddb.Instance, idx int, p clusterPorts) server {
	s := server{Instance: in, node: d.nodeOf(in.DatabaseID, idx), bus: p.Bus}
	s.Port = p.Port
	s.MaxMemoryBytes = in.MaxMemoryBytes / int64(max(in.Shards, 1))
	return s
}

// movePorts gives node idx new client and bus ports, recorded before it starts on them.
func (d *Driver) movePorts(ctx context.Context, in clouddb.Instance, topo *topology, idx int) (server, error) {
	old := topo.Ports[idx]
	p := clusterPorts{}
	taken := maps.Clone(topo.Ports)
	var err error
	if p.Port, err = d.freePort(taken); err != nil {
		return server{}, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	taken[-1] = p
	if p.Bus, err = d.freePort(taken); err != nil {
		return server{}, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	topo.Ports[idx] = p
	if err = d.writeTopology(in.DatabaseID, *topo); err != nil {
		return server{}, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	d.log.Warn("a cluster node's port was taken while it was down; it moves", keyDatabase, in.DatabaseID, keyNode, idx,
		"old_port", old.Port, "old_bus", old.Bus, keyPort, p.Port, "bus", p.Bus)
	return d.clusterServer(in, idx, p), nil
}

// freePort returns a port of the driver's host no one listens on now, outside the ports
// it must avoid (the databases' endpoints) and those of the database's other nodes.
func (d *Driver) freePort(taken map[int]clusterPorts) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(d.host, "0"))
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if d.avoidPorts != nil && d.avoidPorts(port) {
			continue
		}
		if slices.ContainsFunc(slices.Collect(maps.Values(taken)), func(p clusterPorts) bool { return p.Port == port || p.Bus == port }) {
			continue
		}
		return port, nil
	}
	return 0, errors.New("no free port outside the databases' range")
}

// ensureCluster is Ensure for an OSS Cluster instance.
func (d *Driver) ensureCluster(ctx context.Context, in clouddb.Instance) error {
	id := in.DatabaseID
	topo, err := d.readTopology(id)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if topo.Shards == 0 {
		if err = d.convertible(ctx, in, topo); err != nil {
			return err
		}
		topo = topology{Shards: in.Shards, Ports: map[int]clusterPorts{}}
	}
	if topo.Shards != in.Shards {
		return fmt.Errorf("database %d: it runs %d shards: changing the number of shards of a live cluster is not supported", id, topo.Shards)
	}
	want := clusterNodes(in)
	changed := false
	for _, idx := range want {
		p := topo.Ports[idx]
		if idx == 0 && p.Port != in.Port {
			p.Port, changed = in.Port, true
		}
		if p.Port == 0 {
			if p.Port, err = d.freePort(topo.Ports); err != nil {
				return fmt.Errorf("database %d: %w", id, err)
			}
			topo.Ports[idx], changed = p, true
		}
		if p.Bus == 0 {
			if p.Bus, err = d.freePort(topo.Ports); err != nil {
				return fmt.Errorf("database %d: %w", id, err)
			}
			changed = true
		}
		topo.Ports[idx] = p
	}
	if changed {
		// Before any node starts on them: a crash must not lose where a node listens.
		if err := d.writeTopology(id, topo); err != nil {
			return fmt.Errorf("database %d: %w", id, err)
		}
	}
	if err := d.clusterFailover(ctx, in); err != nil {
		return err
	}
	if !in.Replication {
		if err := d.removeClusterReplicas(ctx, in, topo); err != nil {
			return err
		}
	}
	servers := make([]server, 0, len(want))
	for _, idx := range d.replicasFirst(ctx, in, want) {
		s := d.clusterServer(in, idx, topo.Ports[idx])
		if err := makeDir(s.dir); err != nil {
			return fmt.Errorf("database %d: %w", id, err)
		}
		err := d.ensureServer(ctx, s)
		if errors.Is(err, errStopped) {
			// Its partner takes its slots first (see errStopped), then it rejoins.
			if err = d.clusterFailover(ctx, in); err == nil {
				err = d.ensureServer(ctx, s)
			}
		}
		if err != nil && idx != 0 && strings.Contains(err.Error(), "Address already in use") {
			// The node's ports are clouddb's choice, not reserved while it is down:
			// something took one. It starts on new ones, which the cluster learns from
			// its messages; the endpoint's port (node 0) is the store's, and stays.
			if s, err = d.movePorts(ctx, in, &topo, idx); err == nil {
				err = d.ensureServer(ctx, s)
			}
		}
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	return d.formCluster(ctx, in, servers)
}

// convertible checks that a database that ran as one server (one stored with the OSS
// Cluster API before clouddb ran clusters: the API refuses to turn it on for a live
// database) can become a one-shard cluster whose node 0 serves every slot, restarted
// with its data (see ensureServer): one shard, its server on node 0 and no other node,
// and its keys in database 0 only (redis 7.0 crashes loading keys of another database in
// cluster mode).
func (d *Driver) convertible(ctx context.Context, in clouddb.Instance, topo topology) error {
	n0 := d.nodeOf(in.DatabaseID, 0)
	if _, ok, _ := d.readConfig(n0); !ok {
		return nil // nothing ran: a new cluster
	}
	why := ""
	switch {
	case in.Shards != 1:
		why = fmt.Sprintf("it would need %d shards and its keys moved", in.Shards)
	case topo.Primary != 0 || len(d.nodes(in.DatabaseID)) > 1:
		why = "it has a replica"
	}
	if pid := d.livePid(n0); why == "" && pid != 0 {
		c, err := d.probe(ctx, n0, in.Port, cred{internalUser, d.internalSecret(in.DatabaseID)}, pid)
		if err != nil {
			return fmt.Errorf("database %d: check its keys before it becomes a cluster: %w", in.DatabaseID, err)
		}
		info, err := c.Info(ctx, "keyspace").Result()
		c.Close()
		if err != nil {
			return fmt.Errorf("database %d: check its keys before it becomes a cluster: %w", in.DatabaseID, classify(err))
		}
		for _, line := range strings.Split(info, "\n") {
			if db, _, ok := strings.Cut(strings.TrimSpace(line), ":keys="); ok && db != "db0" {
				why = "it has keys in logical database " + strings.TrimPrefix(db, "db") + ", and a cluster has database 0 only"
			}
		}
	}
	if why != "" {
		return fmt.Errorf("database %d: it runs as one Redis server and cannot become an OSS Cluster as it is: %s; create a database with the OSS Cluster API and import a backup", in.DatabaseID, why)
	}
	return nil
}

// clusterHealthy reports, as often as deep checks are made, whether the cluster is whole
// as node 0 sees it: ok, every slot served, every node known, one primary with slots per
// shard and, with replication, a replica following each. A cluster that formCluster
// left unfinished (a crash, a timeout) is not: Ensure finishes it, so that no shard runs
// without the replica its failover needs.
func (d *Driver) clusterHealthy(ctx context.Context, in clouddb.Instance, topo topology) bool {
	d.mu.Lock()
	last := d.clusters[in.DatabaseID]
	d.mu.Unlock()
	if time.Since(last) < deepCheckEvery {
		return true
	}
	n0 := d.nodeOf(in.DatabaseID, 0)
	c, err := d.probe(ctx, n0, topo.Ports[0].Port, cred{internalUser, d.internalSecret(in.DatabaseID)}, d.livePid(n0))
	if err != nil {
		return false
	}
	defer c.Close()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_assigned") != strconv.Itoa(clusterSlots) ||
		infoField(info, "cluster_known_nodes") != strconv.Itoa(len(clusterNodes(in))) {
		return false
	}
	nodes, err := clusterNodesOf(ctx, c)
	if err != nil {
		return false
	}
	primaries := map[string]bool{}
	for _, n := range nodes {
		if n.has("master") && len(n.slots) > 0 && !n.has("fail") {
			primaries[n.id] = true
		}
	}
	replicas := 0
	for _, n := range nodes {
		if n.has("slave") && primaries[n.master] && !n.has("fail") {
			replicas++
		}
	}
	want := 0
	if in.Replication {
		want = in.Shards
	}
	if len(primaries) != in.Shards || replicas != want {
		d.log.Warn("the cluster is not whole; ensuring it", keyDatabase, in.DatabaseID, "primaries", len(primaries), "replicas", replicas)
		return false
	}
	d.mu.Lock()
	d.clusters[in.DatabaseID] = time.Now()
	d.mu.Unlock()
	return true
}

// replicasFirst orders the nodes idxs so that those running as replicas come first: an
// upgrade must give a replica the new binary before its primary writes data an older one
// could not load (as Ensure does for a replicated database).
func (d *Driver) replicasFirst(ctx context.Context, in clouddb.Instance, idxs []int) []int {
	if !in.Replication {
		return idxs
	}
	var replicas, others []int
	for _, idx := range idxs {
		n := d.nodeOf(in.DatabaseID, idx)
		pid := d.livePid(n)
		if pid != 0 {
			if c, err := d.probe(ctx, n, 0, cred{internalUser, d.internalSecret(in.DatabaseID)}, pid); err == nil {
				info, ierr := c.Info(ctx, "replication").Result()
				c.Close()
				if ierr == nil && infoField(info, "role") == "slave" {
					replicas = append(replicas, idx)
					continue
				}
			}
		}
		others = append(others, idx)
	}
	return append(replicas, others...)
}

// clusterClient connects to a running cluster node as the internal user.
func (d *Driver) clusterClient(ctx context.Context, s server) (*redis.Client, error) {
	pid := d.livePid(s.node)
	if pid == 0 {
		return nil, fmt.Errorf("database %d: node %d does not run", s.DatabaseID, s.idx)
	}
	return d.probe(ctx, s.node, s.Port, cred{internalUser, d.internalSecret(s.DatabaseID)}, pid)
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	flags            []string
	slots            []string
}

func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

func parseClusterNodes(text string) []clusterNode {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		out = append(out, clusterNode{id: f[0], addr: f[1], flags: strings.Split(f[2], ","), master: f[3], slots: f[8:]})
	}
	return out
}

func clusterNodesOf(ctx context.Context, c *redis.Client) ([]clusterNode, error) {
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES: %w", classify(err))
	}
	return parseClusterNodes(text), nil
}

// formCluster makes the running nodes one cluster, as far as it is not one yet: node 0
// meets every node it does not know, each shard's primary gets the shard's slots (only
// when no node has any: a cluster that has its slots keeps them where they are), each
// shard's other node replicates its primary, and it waits until every node sees the
// cluster ok.
func (d *Driver) formCluster(ctx context.Context, in clouddb.Instance, servers []server) error {
	id := in.DatabaseID
	clients := make(map[int]*redis.Client, len(servers))
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	ids := map[int]string{}
	for _, s := range servers {
		c, err := d.clusterClient(ctx, s)
		if err != nil {
			return err
		}
		clients[s.idx] = c
		myid, err := c.Do(ctx, "cluster", "myid").Text()
		if err != nil {
			return fmt.Errorf("database %d: node %d: CLUSTER MYID: %w", id, s.idx, classify(err))
		}
		ids[s.idx] = myid
		// A new node gets a config epoch of its own before it meets the others, so that no
		// two primaries start out with the same one: a collision is settled by bumping one
		// of them, and a failover soon after could pick an epoch the loser of it then
		// outbids, taking its slots back empty.
		info, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("database %d: node %d: CLUSTER INFO: %w", id, s.idx, classify(err))
		}
		if infoField(info, "cluster_known_nodes") == "1" && infoField(info, "cluster_current_epoch") == "0" {
			if err := c.Do(ctx, "cluster", "set-config-epoch", s.idx+1).Err(); err != nil {
				return fmt.Errorf("database %d: node %d: CLUSTER SET-CONFIG-EPOCH: %w", id, s.idx, classify(err))
			}
		}
	}
	c0 := clients[0]
	known, err := clusterNodesOf(ctx, c0)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	for _, s := range servers {
		if slices.ContainsFunc(known, func(n clusterNode) bool { return n.id == ids[s.idx] }) {
			continue
		}
		if err := c0.Do(ctx, "cluster", "meet", d.connectHost, s.Port, s.bus).Err(); err != nil {
			return fmt.Errorf("database %d: CLUSTER MEET node %d: %w", id, s.idx, classify(err))
		}
	}
	// Every node knows every other, out of handshake.
	members := map[string]bool{}
	for _, id := range ids {
		members[id] = true
	}
	if err := d.waitCluster(ctx, in, "every node to know the others", func() (bool, error) {
		for _, c := range clients {
			nodes, err := clusterNodesOf(ctx, c)
			if err != nil {
				return false, err
			}
			seen := 0
			for _, n := range nodes {
				if members[n.id] && !n.has("handshake") && !n.has("noaddr") {
					seen++
				}
			}
			if seen < len(ids) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	if err := d.assignSlots(ctx, in, clients); err != nil {
		return err
	}
	if in.Replication {
		if err := d.pairReplicas(ctx, in, clients, ids); err != nil {
			return err
		}
	}
	// Every node must see every slot served, not only say ok: with
	// cluster-require-full-coverage off a node is ok before gossip has told it who serves
	// the other shards' slots, and answers CLUSTERDOWN for them meanwhile.
	return d.waitCluster(ctx, in, "every node to see every slot served", func() (bool, error) {
		for _, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return false, classify(err)
			}
			if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_ok") != strconv.Itoa(clusterSlots) {
				return false, nil
			}
		}
		return true, nil
	})
}

// assignSlots gives each shard's primary the slots of its range that no node serves:
// all of them in a new cluster. A server that joins with keys (one turned into a cluster
// node) has taken the slots of its keys itself; the rest of its range is added.
func (d *Driver) assignSlots(ctx context.Context, in clouddb.Instance, clients map[int]*redis.Client) error {
	shards, err := clients[0].ClusterShards(ctx).Result()
	if err != nil {
		return fmt.Errorf("database %d: CLUSTER SHARDS: %w", in.DatabaseID, classify(err))
	}
	var owned [clusterSlots]bool
	for _, sh := range shards {
		for _, r := range sh.Slots {
			for i := max(int(r.Start), 0); i <= min(int(r.End), clusterSlots-1); i++ {
				owned[i] = true
			}
		}
	}
	for s := range in.Shards {
		c := clients[2*s]
		if r, ok := clients[2*s+1]; ok {
			if info, err := c.Info(ctx, "replication").Result(); err == nil && infoField(info, "role") != "master" {
				c = r // the shard failed over
			}
		}
		lo, hi := slotRange(s, in.Shards)
		for i := lo; i <= hi; {
			if owned[i] {
				i++
				continue
			}
			j := i
			for j < hi && !owned[j+1] {
				j++
			}
			if err := c.Do(ctx, "cluster", "addslotsrange", i, j).Err(); err != nil {
				return fmt.Errorf("database %d: shard %d: CLUSTER ADDSLOTSRANGE %d %d: %w", in.DatabaseID, s, i, j, classify(err))
			}
			i = j + 1
		}
	}
	return nil
}

// pairReplicas makes the node of each shard that serves no slots replicate the one that
// does (the shard's primary: node 2s at first, its partner after a failover).
func (d *Driver) pairReplicas(ctx context.Context, in clouddb.Instance, clients map[int]*redis.Client, ids map[int]string) error {
	return d.waitCluster(ctx, in, "each shard's replica to follow its primary", func() (bool, error) {
		nodes, err := clusterNodesOf(ctx, clients[0])
		if err != nil {
			return false, err
		}
		byID := map[string]clusterNode{}
		for _, n := range nodes {
			byID[n.id] = n
		}
		done := true
		for s := range in.Shards {
			a, b := ids[2*s], ids[2*s+1]
			primary, replica := a, b
			if len(byID[b].slots) > 0 || (byID[b].has("master") && byID[a].has("slave") && byID[a].master == b) {
				primary, replica = b, a
			}
			if byID[replica].master == primary && byID[replica].has("slave") {
				continue
			}
			done = false
			ridx := 2*s + 1
			if replica == a {
				ridx = 2 * s
			}
			if err := clients[ridx].Do(ctx, "cluster", "replicate", primary).Err(); err != nil {
				// The replica may not know the primary as one yet (gossip): try again.
				d.log.Debug("CLUSTER REPLICATE not taken yet", keyDatabase, in.DatabaseID, keyNode, ridx, "error", err)
			}
		}
		return done, nil
	})
}

// waitCluster polls cond until it holds, up to clusterWait.
func (d *Driver) waitCluster(ctx context.Context, in clouddb.Instance, what string, cond func() (bool, error)) error {
	if err := backoff.Until(ctx, clusterWait, cond); err != nil {
		return fmt.Errorf("database %d: waiting for %s: %w", in.DatabaseID, what, err)
	}
	return nil
}

// clusterFailover makes, in every shard whose serving node's process is gone, the other
// node take its slots over (CLUSTER FAILOVER TAKEOVER: no vote of the other primaries is
// needed, so a one-shard cluster fails over too) when it holds the data (see
// promotable). The dead node then starts again as a replica: the cluster tells it that
// its slots have a newer owner.
func (d *Driver) clusterFailover(ctx context.Context, in clouddb.Instance) error {
	if !in.Replication {
		return nil
	}
	for s := range in.Shards {
		a, b := d.nodeOf(in.DatabaseID, 2*s), d.nodeOf(in.DatabaseID, 2*s+1)
		pa, pb := d.livePid(a), d.livePid(b)
		if (pa == 0) == (pb == 0) {
			continue
		}
		alive, pid := a, pa
		if pa == 0 {
			alive, pid = b, pb
		}
		c, err := d.probe(ctx, alive, 0, cred{internalUser, d.internalSecret(in.DatabaseID)}, pid)
		if err != nil {
			// It may hold the only copy of the shard's data: see failover.
			return fmt.Errorf("database %d: shard %d's primary is gone and the other node (pid %d) does not answer yet: %w (%w)", in.DatabaseID, s, pid, err, clouddb.ErrServerStarting)
		}
		err = d.takeOver(ctx, c, in, alive)
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// takeOver makes the cluster node behind c its shard's primary if it is a replica that
// holds the data.
func (d *Driver) takeOver(ctx context.Context, c *redis.Client, in clouddb.Instance, n node) error {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("database %d: node %d: INFO replication: %w", in.DatabaseID, n.idx, classify(err))
	}
	if infoField(info, "role") == "master" {
		return nil
	}
	has, why, err := promotable(ctx, c)
	if err != nil || !has {
		d.log.Warn("a shard's primary is gone and its replica cannot take over", keyDatabase, in.DatabaseID, keyNode, n.idx, "why", why, "error", err)
		return nil
	}
	start := time.Now()
	if err = c.Do(ctx, "cluster", "failover", "takeover").Err(); err != nil {
		return fmt.Errorf("database %d: node %d: CLUSTER FAILOVER TAKEOVER: %w", in.DatabaseID, n.idx, classify(err))
	}
	err = d.waitCluster(ctx, in, "the replica to take over", func() (bool, error) {
		info, ierr := c.Info(ctx, "replication").Result()
		return ierr == nil && infoField(info, "role") == "master", ierr
	})
	if err != nil {
		return err
	}
	// The dead node starts again only once every live node knows the new owner of its
	// slots: one that did not could take the restarted node's old claim for current.
	myid, err := c.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		return fmt.Errorf("database %d: node %d: CLUSTER MYID: %w", in.DatabaseID, n.idx, classify(err))
	}
	err = d.waitCluster(ctx, in, "every node to know the new primary", func() (bool, error) {
		for _, m := range d.nodes(in.DatabaseID) {
			pid := d.livePid(m)
			if pid == 0 || m == n {
				continue
			}
			mc, perr := d.probe(ctx, m, 0, cred{internalUser, d.internalSecret(in.DatabaseID)}, pid)
			if perr != nil {
				return false, perr
			}
			nodes, nerr := clusterNodesOf(ctx, mc)
			mc.Close()
			if nerr != nil {
				return false, nerr
			}
			if !slices.ContainsFunc(nodes, func(x clusterNode) bool { return x.id == myid && x.has("master") && len(x.slots) > 0 }) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	d.log.Warn("a shard's primary is gone: its replica took over", keyDatabase, in.DatabaseID, keyNode, n.idx, "took", time.Since(start).Round(time.Microsecond))
	return nil
}

// shardPrimary is how clouddb reaches the primary of shard s of a cluster (the node of
// the shard that answers as a master), with the shard's slots.
func (d *Driver) shardPrimary(ctx context.Context, in clouddb.Instance, s int) (redisdata.Shard, error) {
	if s < 0 || s >= in.Shards {
		return redisdata.Shard{}, fmt.Errorf("database %d has %d shards, not shard %d", in.DatabaseID, in.Shards, s)
	}
	topo, err := d.readTopology(in.DatabaseID)
	if err != nil {
		return redisdata.Shard{}, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	lo, hi := slotRange(s, in.Shards)
	for _, idx := range []int{2 * s, 2*s + 1} {
		n := d.nodeOf(in.DatabaseID, idx)
		pid := d.livePid(n)
		if pid == 0 {
			continue
		}
		port := topo.Ports[idx].Port
		c, err := d.probe(ctx, n, port, cred{internalUser, d.internalSecret(in.DatabaseID)}, pid)
		if err != nil {
			continue
		}
		info, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err == nil && infoField(info, "role") == "master" {
			return redisdata.Shard{Endpoint: d.nodeEndpoint(n, port), Lo: lo, Hi: hi}, nil
		}
	}
	return redisdata.Shard{}, fmt.Errorf("database %d: shard %d has no primary running", in.DatabaseID, s)
}

// removeClusterReplicas takes the replica nodes out of the cluster and removes them, once
// replication is turned off. A replica that serves a shard's slots since a failover hands
// them back first (CLUSTER FAILOVER on the node that follows it).
func (d *Driver) removeClusterReplicas(ctx context.Context, in clouddb.Instance, topo topology) error {
	for s := range in.Shards {
		r := d.nodeOf(in.DatabaseID, 2*s+1)
		if _, err := os.Stat(filepath.Join(r.dir, confFile)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		return fmt.Errorf("database %d: turning replication off on a live cluster is not supported", in.DatabaseID)
	}
	return nil
}
