package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb"
)

// failover makes the replica r the primary when the primary p's server is gone and r's
// holds the data (see promotable), and returns the nodes in their new roles. It also
// finishes a failover that a crash cut short: a replica node that already serves as a
// primary. Without a live replica that has the data, the roles stay: the primary starts
// again on its own files, and a replica that never synced has nothing to lose.
//
// running reports that the primary it returns runs: p's server ran, or r's was
// promoted. If that server is gone later in the same Ensure (killed while Ensure adopts
// the replica or the primary, or starts a new replica after a failover), the replica
// may hold the only copy of the data, and only another call of failover may decide to
// start the primary on its own files (see errPrimaryExited). It is false when failover
// decided that the dead primary starts on its own files.
func (d *Driver) failover(ctx context.Context, in clouddb.Instance, p, r node) (np, nr node, running bool, err error) {
	if d.livePid(p) != 0 {
		return p, r, true, nil
	}
	rpid := d.livePid(r)
	if rpid == 0 {
		return p, r, false, nil
	}
	conf, ok, err := d.readConfig(r)
	if err != nil || !ok || conf.InternalSecret == "" {
		// Not a replica clouddb can reach: Ensure deals with it as a server.
		return p, r, false, nil
	}
	if conf.Primary == "" {
		// Its config file makes it a primary: it is no replica cut short in its promotion
		// (a promotion does not rewrite the file) but an import's loading server whose
		// import never took over (clouddb stopped in the middle, see loadSwap). Its data
		// is not the database's: the primary starts on its own files, and Ensure makes
		// this server its replica, or removes it.
		d.log.Warn("the primary is gone and the other node's server is an import that never took over; the primary starts on its own data", keyDatabase, in.DatabaseID, keyNode, r.idx, keyPid, rpid)
		return p, r, false, nil
	}
	c, err := d.probe(ctx, r, 0, cred{internalUser, conf.InternalSecret}, rpid)
	if err != nil {
		// Busy (a slow command, a disk stall) or hung: it may hold the only copy of the
		// data, so neither is it stopped nor the primary started on its own files. The
		// next Ensure asks again.
		return p, r, false, fmt.Errorf("database %d: the primary's server is gone and its replica (pid %d) does not answer yet: %w (%w)", in.DatabaseID, rpid, err, clouddb.ErrServerStarting)
	}
	defer c.Close()
	has, why, err := promotable(ctx, c)
	if err != nil {
		// A busy replica's INFO may time out as its PING did not (see above): a wait,
		// not an error that would leave the database down, unsupervised.
		return p, r, false, fmt.Errorf("database %d: ask the replica whether it has the data: %w (%w)", in.DatabaseID, err, clouddb.ErrServerStarting)
	}
	if !has {
		d.log.Warn("the primary is gone and its replica never synced; the primary starts on its own data", keyDatabase, in.DatabaseID, keyNode, r.idx, "why", why)
		return p, r, false, nil
	}
	start := time.Now()
	if err := d.promote(ctx, c, in); err != nil {
		return p, r, false, fmt.Errorf("database %d: promote the replica: %w", in.DatabaseID, err)
	}
	// The roles are the topology file's from now on: a crash before it is written finds
	// the replica serving as a primary, which promotable accepts.
	if err := d.writeTopology(in.DatabaseID, topology{Primary: r.idx}); err != nil {
		return p, r, false, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	d.mu.Lock()
	delete(d.checked, r)
	delete(d.checked, p)
	d.mu.Unlock()
	d.log.Warn("the primary's server is gone: its replica took over the endpoint", keyDatabase, in.DatabaseID, keyNode, r.idx, keyPid, rpid, keyPort, in.Port, "took", time.Since(start).Round(time.Microsecond))
	return r, p, true, nil
}

// errPrimaryExited: the primary's server ran when failover looked (or failover promoted
// it) and is gone since (killed while Ensure went on). Starting it on its own files then
// would lose what only its replica holds (without persistence, all of it: the replica
// then syncs from the empty primary too), so Ensure calls failover again instead. It is
// a wait to the reconciler (ErrServerStarting): the next Ensure fails over, and the
// database is not left in error, unsupervised, with its data on a replica nobody
// promotes.
var errPrimaryExited = fmt.Errorf("the primary's server exited while Ensure ran: its replica is asked to take over (%w)", clouddb.ErrServerStarting)

// The points where Ensure calls Driver.testHook: before it ensures the primary (after
// failover and the replica), and when adopt has reached a running server, before it
// reconfigures it.
const (
	hookBeforePrimary = "before-primary"
	hookAdopting      = "adopting"
	// hookImportLoaded: an import's new server has loaded its file (see loadSwap), before
	// the takeover.
	hookImportLoaded = "import-loaded"
	// hookImportTookOver: the server with the imported data serves the port, before the
	// old node goes and the replica starts.
	hookImportTookOver = "import-took-over"
	// hookLivePid: a look at a node's pid file (and maybe /proc) for its server.
	hookLivePid = "live-pid"
)

// maxFailoverRounds bounds Ensure's rounds of failover: each round after the first needs
// a primary that ran at its start to be gone by its end (the first's, then the replica
// promoted in its place, then the one promoted after that).
const maxFailoverRounds = 3

// promotable reports whether a replica holds its primary's data: its link to the primary
// was up once (redis reports master_link_down_since_seconds -1 until then) and it is not
// in the middle of a full sync, which empties it first. A server that already serves as a
// primary (a failover cut short) holds it too.
func promotable(ctx context.Context, c *redis.Client) (bool, string, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return false, "", classify(err)
	}
	switch {
	case infoField(info, "role") == "master":
		return true, "", nil
	case infoField(info, "master_sync_in_progress") == "1":
		return false, "a full sync is in progress", nil
	case infoField(info, "master_link_status") == "up":
		return true, "", nil
	}
	down, err := strconv.Atoi(infoField(info, "master_link_down_since_seconds"))
	if err != nil {
		return false, "", fmt.Errorf("INFO replication: master_link_down_since_seconds: %w", err)
	}
	if down < 0 {
		return false, "its link to the primary was never up", nil
	}
	return true, "", nil
}

// promote makes the replica behind c a primary serving the database's port: it stops
// replicating (keeping its data) and listens where the primary did, so that clients
// reconnect to the same endpoint.
func (d *Driver) promote(ctx context.Context, c *redis.Client, in clouddb.Instance) error {
	if err := c.Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		return fmt.Errorf("REPLICAOF NO ONE: %w", classify(err))
	}
	port := strconv.Itoa(in.Port)
	args := []any{"config", "set", "port", port}
	if in.TLS != nil {
		args = []any{"config", "set", "port", "0", "tls-port", port}
	}
	// The dead primary's listener may outlive it for a moment: a child it forked (a
	// background save, a full sync) can hold it until it notices. A port held longer
	// (a stranger took it) fails this, and the next Ensure tries again.
	deadline := time.Now().Add(promoteListenWait)
	for {
		err := c.Do(ctx, args...).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || !strings.Contains(err.Error(), "Unable to listen") {
			return fmt.Errorf("CONFIG SET port %s: %w", port, classify(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// promoteListenWait bounds the wait for the dead primary's port to be free.
const promoteListenWait = 2 * time.Second

// removeNode stops node n's server without saving and deletes its files: the replica of
// a database whose replication was turned off (node 1's directory, or node 0's files
// when node 1 serves since a failover). Nothing to remove does nothing.
func (d *Driver) removeNode(ctx context.Context, n node) error {
	d.forget(n)
	if _, err := os.Stat(filepath.Join(n.dir, confFile)); errors.Is(err, os.ErrNotExist) {
		if n.idx != 0 {
			// Made, but its server never got a config (a crash in between): a server
			// that runs there is found by its directory all the same.
			if _, err := os.Stat(n.dir); errors.Is(err, os.ErrNotExist) {
				return nil
			}
		} else if _, err := os.Stat(filepath.Join(n.dir, pidFile)); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	if pid := d.livePid(n); pid != 0 {
		if err := d.shutdownNoSave(ctx, n, pid); err != nil {
			return err
		}
		d.log.Info("stopped redis-server for removal", keyDatabase, n.db, keyNode, n.idx, keyPid, pid)
	}
	if d.sockDir != "" {
		if err := os.Remove(d.sockPath(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if n.idx != 0 {
		return removeAll(n.dir)
	}
	// Node 0's files share the database's directory with node 1's and the topology.
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		// The other nodes' directories, the topology and the TLS files the nodes share.
		if e.IsDir() && strings.HasPrefix(e.Name(), nodeDirPrefix) || e.Name() == topologyFile || strings.HasPrefix(e.Name(), tlsPrefix) {
			continue
		}
		if err := removeAll(filepath.Join(n.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// forget drops what the Driver remembers of node n's server.
func (d *Driver) forget(n node) {
	d.mu.Lock()
	delete(d.rules, n)
	delete(d.users, n)
	delete(d.checked, n)
	delete(d.busySince, n)
	d.mu.Unlock()
}

// removeAll removes path, trying again briefly: a fork child (a background save) may
// still be writing a file as its parent goes.
func removeAll(path string) error {
	for i := 0; ; i++ {
		err := os.RemoveAll(path)
		if err == nil {
			return nil
		}
		if i == 20 {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
