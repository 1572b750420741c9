package local

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"

	"clouddb"
	"clouddb/redisdata"
)

// This file moves data: snapshots for backups, loads and copies for imports, and the
// replicators behind replicaOf. All of them work as the database's internal user, which
// may write even while clients may not.

// internalEndpoint is how clouddb itself reaches the database's server: through its unix
// socket when it has one (see dialServer).
func (d *Driver) internalEndpoint(in clouddb.Instance) redisdata.Endpoint {
	return d.nodeEndpoint(d.primaryNode(in.DatabaseID), in.Port)
}

// nodeEndpoint is how clouddb reaches node n, which listens on port (0: its socket only).
func (d *Driver) nodeEndpoint(n node, port int) redisdata.Endpoint {
	return redisdata.Endpoint{
		Addr:     d.internalAddr(n, port),
		Username: internalUser,
		Password: d.internalSecret(n.db),
		NoEvict:  true, // its RESTOREs of big keys must pass the clients' memory limit
	}
}

// endpointOf converts a source; its connections go through the dialer the driver was
// given (the address guard). A source that is one of this Driver's own databases, named
// with its tenant's password, is read as that database's internal user instead: the
// tenant's user may not run the replication commands (PSYNC, REPLCONF) a snapshot needs.
func (d *Driver) endpointOf(e clouddb.RedisEndpoint) redisdata.Endpoint {
	if ep, ok := d.ownEndpoint(e); ok {
		return ep
	}
	ep := redisdata.Endpoint{Addr: e.Addr, Username: e.Username, Password: e.Password, Dial: d.dialSource}
	if e.TLS {
		ep.TLS = d.sourceTLS()
	}
	return ep
}

// Snapshot writes a consistent RDB snapshot of the live data of one shard (of its
// primary) to w, taken over the replication protocol, so nothing touches the database's
// own files.
func (d *Driver) Snapshot(ctx context.Context, in clouddb.Instance, shard int, w io.Writer) (int64, error) {
	if !in.OSSCluster {
		if shard != 0 {
			return 0, fmt.Errorf("database %d has one shard, not shard %d", in.DatabaseID, shard)
		}
		return redisdata.Snapshot(ctx, d.internalEndpoint(in), w)
	}
	ep, err := d.shardPrimary(ctx, in, shard)
	if err != nil {
		return 0, err
	}
	return redisdata.Snapshot(ctx, ep.Endpoint, w)
}

// Load replaces the data with that of the RDB files. A database that is not a cluster
// takes a swap of servers (see loadSwap), a cluster a reload of each shard (see
// loadCluster). When the files cannot take either,
// each file is loaded into a throwaway server first; only when every one loaded and
// together they fit the memory limit is the database emptied and filled, key by key.
// Either way a file that does not load or does not fit leaves the data as it was.
func (d *Driver) Load(ctx context.Context, in clouddb.Instance, files []string) error {
	if err := d.loadFast(ctx, in, files); !errors.Is(err, errSlowLoad) {
		return err
	}
	return d.loadKeys(ctx, in, files)
}

// loadKeys is Load by a copy of every key (DUMP, RESTORE) out of throwaway servers that
// loaded the files.
func (d *Driver) loadKeys(ctx context.Context, in clouddb.Instance, files []string) error {
	temps, err := redisdata.LoadChecked(ctx, d.loadConfig(in), files, in.MaxMemoryBytes)
	if err != nil {
		return err
	}
	defer func() {
		for _, t := range temps {
			t.Close()
		}
	}()
	if in.OSSCluster {
		// Every key goes to the shard of its slot, whichever part of a backup (or file)
		// it comes from.
		shards := make([]redisdata.Shard, 0, in.Shards)
		for s := range in.Shards {
			sh, err := d.shardPrimary(ctx, in, s)
			if err != nil {
				return err
			}
			shards = append(shards, sh)
		}
		// Each shard holds its share of the memory limit: data that one shard cannot
		// hold (hash tags crowding one) is refused before anything is emptied.
		perShard := make([]int64, len(shards))
		for _, t := range temps {
			used, err := redisdata.ShardUsage(ctx, t.Endpoint(), shards)
			if err != nil {
				return fmt.Errorf("check the data against the shards: %w", err)
			}
			for s, n := range used {
				perShard[s] += n
			}
		}
		limit := in.MaxMemoryBytes / int64(len(shards))
		for s, n := range perShard {
			if in.MaxMemoryBytes > 0 && n > limit {
				return fmt.Errorf("%w: shard %d (slots %d-%d) would need about %d bytes, its share of the limit is %d",
					clouddb.ErrDataTooLarge, s, shards[s].Lo, shards[s].Hi, n, limit)
			}
		}
		for i, t := range temps {
			if _, err := redisdata.CopyKeysToCluster(ctx, t.Endpoint(), shards, redisdata.CopyOptions{Replace: i == 0}); err != nil {
				return fmt.Errorf("copy the data into the database: %w", err)
			}
		}
		return nil
	}
	for i, t := range temps {
		if _, err := redisdata.CopyKeys(ctx, t.Endpoint(), d.internalEndpoint(in), redisdata.CopyOptions{Replace: i == 0}); err != nil {
			return fmt.Errorf("copy the data into the database: %w", err)
		}
	}
	return nil
}

// CopyFrom replaces the data with every key of a live server. The source's keys go to a
// throwaway copy of its snapshot first, so a source that cannot be read, or whose data is
// too large, leaves the database as it was.
func (d *Driver) CopyFrom(ctx context.Context, in clouddb.Instance, src clouddb.RedisEndpoint) error {
	tmp, err := os.CreateTemp(d.dir, ".import-*.rdb")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := redisdata.Snapshot(ctx, d.endpointOf(src), tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return d.Load(ctx, in, []string{tmp.Name()})
}

// ownEndpoint returns the internal endpoint of the database of this Driver that e names:
// its address is this host and one database's port, its user the default one, and its
// password that database's (so it grants nothing its holder could not read already).
// Whether e says TLS does not matter: the database is read through its socket, so a
// same-account source (host:port, no scheme) that turned TLS on, and a database that
// asks its clients for a certificate, are sources too.
func (d *Driver) ownEndpoint(e clouddb.RedisEndpoint) (redisdata.Endpoint, bool) {
	if e.Username != "" && e.Username != "default" {
		return redisdata.Endpoint{}, false
	}
	host, portText, err := net.SplitHostPort(e.Addr)
	if err != nil || (host != d.host && host != d.connectHost && host != "localhost") {
		return redisdata.Endpoint{}, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return redisdata.Endpoint{}, false
	}
	ids, err := d.Instances(context.Background())
	if err != nil {
		return redisdata.Endpoint{}, false
	}
	for _, id := range ids {
		c, ok, err := d.readConfig(d.primaryNode(id))
		if err != nil || !ok || c.Port != port || c.InternalSecret == "" {
			continue
		}
		// The password must log in as its holder would: not with the default user off
		// (clouddb's own user would read for them what they cannot).
		if subtle.ConstantTimeCompare([]byte(c.Password), []byte(e.Password)) != 1 || c.DefaultOff {
			return redisdata.Endpoint{}, false
		}
		// Nor, from another account, past a client certificate the tenant must present.
		if c.TLSAuthClients && !e.SameAccount {
			return redisdata.Endpoint{}, false
		}
		return redisdata.Endpoint{
			Addr:     d.internalAddr(d.primaryNode(id), port),
			Username: internalUser,
			Password: c.InternalSecret,
			Dial:     d.ownDial(id, net.JoinHostPort(d.connectHost, portText)),
		}, true
	}
	return redisdata.Endpoint{}, false
}

// ownDial is the Dial of database id, one of this Driver's own, reached as a source at
// tcpAddr: the address guard decides as it would for the tenant's user, on that TCP
// address, even when the connection itself goes through the server's unix socket. The
// socket is that of the node serving as the primary when the connection is made, not
// when the source was named: a failover, or an import's swap of servers, moves the
// database to its other node, and a replicator that kept dialing the first node's socket
// would never reach the source again.
func (d *Driver) ownDial(id int, tcpAddr string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		sock := d.sockPath(d.primaryNode(id))
		if !isSocket(sock) {
			// A server from before the unix sockets: its port.
			if d.dialSource != nil {
				return d.dialSource(ctx, "tcp", tcpAddr)
			}
			var nd net.Dialer
			return nd.DialContext(ctx, "tcp", tcpAddr)
		}
		if d.dialSource != nil {
			probe, err := d.dialSource(ctx, "tcp", tcpAddr)
			if err != nil {
				return nil, err
			}
			probe.Close()
		}
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", sock)
	}
}

// loadConfig is how files meant for the database are checked: by a throwaway server of
// the database's own Redis version, which reads what that version wrote (an older one
// may refuse a newer RDB format).
func (d *Driver) loadConfig(in clouddb.Instance) redisdata.LoadConfig {
	bin := d.bin
	if _, b, err := d.binary(in); err == nil {
		bin = b
	}
	return redisdata.LoadConfig{Binary: bin, TempDir: d.dir, MaxMemory: in.MaxMemoryBytes}
}

// replica is the replicator of one database and the sources and binary it was started
// with.
type replica struct {
	r       *redisdata.Replicator
	sources []clouddb.RedisEndpoint
	bin     string
	target  string // the address it writes to (the socket appears with a restart)
}

// syncReplica makes the database's replicator follow exactly in.ReplicaOf, checking what
// it loads with bin, the binary of the version the database runs: started, restarted
// with the new list or binary (after an upgrade, the old version's may not read what
// the sources' newer versions write), or stopped.
func (d *Driver) syncReplica(in clouddb.Instance, bin string) {
	d.mu.Lock()
	cur := d.replicas[in.DatabaseID]
	d.mu.Unlock()
	target := d.internalEndpoint(in)
	if cur != nil && slices.Equal(cur.sources, in.ReplicaOf) && cur.bin == bin && cur.target == target.Addr {
		return
	}
	d.stopReplica(in.DatabaseID)
	if len(in.ReplicaOf) == 0 {
		return
	}
	srcs := make([]redisdata.Endpoint, len(in.ReplicaOf))
	for i, s := range in.ReplicaOf {
		srcs[i] = d.endpointOf(s)
	}
	id := in.DatabaseID
	// A source's snapshot is loaded under the database's memory limit: one that unpacks past it
	// (a hostile source) fails that source rather than take the machine's memory.
	opts := redisdata.ReplicatorOptions{Load: redisdata.LoadConfig{Binary: bin, TempDir: d.dir, MaxMemory: in.MaxMemoryBytes}, OnEvent: func(e redisdata.Event) {
		if d.replicaEvent != nil {
			d.replicaEvent(id, e)
		}
	}}
	rep := &replica{r: redisdata.Start(context.Background(), target, srcs, opts), sources: slices.Clone(in.ReplicaOf), bin: bin, target: target.Addr}
	d.mu.Lock()
	d.replicas[id] = rep
	d.mu.Unlock()
	d.log.Info("replicating", keyDatabase, id, "sources", len(srcs), "binary", bin)
}

// stopReplica stops the database's replicator, if any.
func (d *Driver) stopReplica(id int) {
	d.mu.Lock()
	cur := d.replicas[id]
	delete(d.replicas, id)
	d.mu.Unlock()
	if cur != nil {
		cur.r.Stop()
		d.log.Info("stopped replicating", keyDatabase, id)
	}
}

// ReplicaStatus reports the state of each source of the database, in order; nil when it
// replicates from none.
func (d *Driver) ReplicaStatus(id int) []redisdata.SourceStatus {
	d.mu.Lock()
	cur := d.replicas[id]
	d.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.r.Status()
}
