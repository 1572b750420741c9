package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"clouddb"
)

// A database runs on one or two nodes, each a redis-server with its own directory: node
// 0, whose directory is the database's own (the only node a database had before
// replication, so servers of an older clouddb are adopted there), and, with replication,
// node 1 in a subdirectory. One node is the primary: it serves the database's port. The
// other replicates from it and listens on its unix socket only (port 0), so that taking
// over is CONFIG SET port on the same endpoint. Which node is the primary the topology
// file says; it changes at each failover.
type node struct {
	db  int    // the database's id
	idx int    // 0 or 1
	dir string // its data directory
}

// topologyFile, in the database's directory, names the primary node.
const topologyFile = "topology.json"

// nodeDirPrefix names the directories of nodes other than node 0 inside the database's:
// node1 (a replica), and the nodes of a cluster (see cluster.go).
const nodeDirPrefix = "node"

// nodeOf returns node idx of database id.
func (d *Driver) nodeOf(id, idx int) node {
	dir := d.dbDir(id)
	if idx != 0 {
		dir = filepath.Join(dir, nodeDirPrefix+strconv.Itoa(idx))
	}
	return node{db: id, idx: idx, dir: dir}
}

// other is the node that pairs with n: a primary's replica, a replica's primary (in a
// cluster, node 2s and 2s+1 serve shard s).
func (d *Driver) other(n node) node { return d.nodeOf(n.db, n.idx^1) }

// nodes lists the database's nodes that have a directory: node 0 always, the others as
// found.
func (d *Driver) nodes(id int) []node {
	out := []node{d.nodeOf(id, 0)}
	entries, err := os.ReadDir(d.dbDir(id))
	if err != nil {
		return out
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), nodeDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if idx, err := strconv.Atoi(rest); err == nil && idx > 0 && strconv.Itoa(idx) == rest {
			out = append(out, d.nodeOf(id, idx))
		}
	}
	slices.SortFunc(out, func(a, b node) int { return a.idx - b.idx })
	return out
}

// server is what one node runs: the database's instance, with the port the node serves
// (the database's for the primary, 0 for a replica) and, for a replica, the address of
// the primary it follows.
type server struct {
	clouddb.Instance
	node
	// primary is "host port" of the server this one replicates, "" for the primary.
	primary string
	// bus is a cluster node's cluster bus port, 0 outside a cluster (see cluster.go).
	bus int
	// ranAtFailover marks a replicated database's primary whose server ran when
	// failover looked (or was promoted by it): ensureServer does not start it on its
	// own files if it is gone by then, but returns errPrimaryExited, so that failover
	// decides (see failover).
	ranAtFailover bool
}

// primaryServer and replicaServer are what the nodes of in run.
func (d *Driver) primaryServer(in clouddb.Instance, n node) server {
	return server{Instance: in, node: n}
}

func (d *Driver) replicaServer(in clouddb.Instance, n node) server {
	s := server{Instance: in, node: n, primary: d.connectHost + " " + strconv.Itoa(in.Port)}
	s.Port = 0
	return s
}

type topology struct {
	// Primary is the index of the node that serves the database's port.
	Primary int `json:"primary"`
	// Shards and Ports are an OSS Cluster database's (see cluster.go): its number of
	// shards, and the ports of each node by index.
	Shards int                  `json:"shards,omitempty"`
	Ports  map[int]clusterPorts `json:"ports,omitempty"`
}

// readTopology reads the database's topology file; none means node 0 is the primary.
// What it read is kept: only this Driver writes the file (see writeTopology), and Running
// asks every second.
func (d *Driver) readTopology(id int) (topology, error) {
	d.mu.Lock()
	t, ok := d.topos[id]
	gen := d.topoGen[id]
	d.mu.Unlock()
	if ok {
		t.Ports = maps.Clone(t.Ports) // the caller's to change
		return t, nil
	}
	t, err := readTopologyFile(filepath.Join(d.dbDir(id), topologyFile))
	if err == nil {
		d.mu.Lock()
		// Not if a write began meanwhile: what was read may be the file before it.
		if d.topoGen[id] == gen {
			c := t
			c.Ports = maps.Clone(t.Ports)
			d.topos[id] = c
		}
		d.mu.Unlock()
	}
	return t, err
}

func readTopologyFile(path string) (topology, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return topology{}, nil
	}
	if err != nil {
		return topology{}, err
	}
	var t topology
	if err := json.Unmarshal(data, &t); err != nil {
		return topology{}, fmt.Errorf("%s: %w", topologyFile, err)
	}
	if t.Primary != 0 && t.Primary != 1 {
		return topology{}, fmt.Errorf("%s: primary node %d: want 0 or 1", topologyFile, t.Primary)
	}
	return t, nil
}

func (d *Driver) writeTopology(id int, t topology) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	// The generation changes before and after the write, so that a reader that read
	// the file meanwhile does not keep what it read (see readTopology).
	d.mu.Lock()
	d.topoGen[id]++
	delete(d.topos, id)
	d.mu.Unlock()
	err = writeFileAtomic(filepath.Join(d.dbDir(id), topologyFile), append(data, '\n'), 0o600)
	d.mu.Lock()
	d.topoGen[id]++
	if err == nil {
		c := t
		c.Ports = maps.Clone(t.Ports)
		d.topos[id] = c
	}
	d.mu.Unlock()
	return err
}

// primaryNode is the database's primary node as its topology file says (node 0 when the
// file cannot be read: the error is Ensure's to report).
func (d *Driver) primaryNode(id int) node {
	t, err := d.readTopology(id)
	if err != nil {
		return d.nodeOf(id, 0)
	}
	return d.nodeOf(id, t.Primary)
}
