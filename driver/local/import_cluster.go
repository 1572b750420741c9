package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"clouddb"
	"clouddb/redisdata"
)

// loadCluster imports into an OSS Cluster by a reload of each shard. The parts are split
// by hash slot, as they are read, into one file per shard (redisdata.SplitRDB). Each
// file is loaded by a throwaway server of the database's version that checks every value
// (sanitize-dump-payload) and is measured against the shard's share of the memory limit.
// Only when every shard's file passed does each shard's primary replace its data with
// its file (DEBUG RELOAD NOSAVE): the node keeps its identity, its slots and its port,
// and its replica then resyncs in full. A restart on the file instead would load it as
// fast, but a cluster refuses a restarted primary's writes for two seconds after it
// loaded (redis' delay for the cluster to reconfigure it). A file that fails leaves
// every shard's data as it was.
//
// Data the splitter cannot take (see redisdata.ErrNotSplittable), parts that do not load
// together (a key in two of them), and nodes started before clouddb allowed their
// internal user DEBUG return errSlowLoad: such data is copied key by key.
func (d *Driver) loadCluster(ctx context.Context, in clouddb.Instance, parts []io.Reader) error {
	id := in.DatabaseID
	ctx, done, err := d.beginImport(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	topo, err := d.readTopology(id)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	n := in.Shards
	if n < 1 || topo.Shards != n {
		return errSlowLoad
	}
	targets := make([]reloadTarget, 0, n)
	defer func() {
		for _, t := range targets {
			t.c.Close()
		}
	}()
	for s := range n {
		t, err := d.reloadTarget(ctx, in, topo, s)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}

	files := make([]string, n)
	outs := make([]io.Writer, n)
	for s := range n {
		f, err := os.CreateTemp(d.dir, ".import-*.rdb")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		files[s], outs[s] = f.Name(), f
	}
	owner := slotOwners(n)
	readers := make([]io.Reader, len(parts))
	for i, p := range parts {
		readers[i] = ctxReader{ctx, p}
	}
	err = redisdata.SplitRDB(outs, func(slot int) int { return int(owner[slot]) }, readers)
	for _, w := range outs {
		if cerr := w.(*os.File).Close(); err == nil {
			err = cerr
		}
	}
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, redisdata.ErrNotSplittable):
		d.log.Info("import: the data is copied key by key", keyDatabase, id, "why", err)
		return errSlowLoad
	case errors.Is(err, redisdata.ErrCorrupt):
		return fmt.Errorf("%w: %v", clouddb.ErrDataCorrupt, err)
	case err != nil:
		return err
	}
	if err := d.checkShardFiles(ctx, in, files); err != nil {
		if len(parts) > 1 && errors.Is(err, clouddb.ErrDataCorrupt) {
			d.log.Info("import: the parts did not load together; loading them one by one", keyDatabase, id, "why", err)
			return errSlowLoad
		}
		return err
	}
	if ctx.Err() != nil {
		// Ended (Stop, Remove, the caller) before any shard was touched.
		return context.Cause(ctx)
	}

	// Once begun, the reloads run to their end (see loadSwap's takeover): every shard
	// gets its file, and Stop waits for the lock.
	tctx := context.WithoutCancel(ctx)
	start := time.Now()
	var g errgroup.Group
	for s, t := range targets {
		g.Go(func() error { return d.reloadShard(tctx, in, topo, t, files[s]) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("database %d: the import reached some shards only, which may hold the data of before: %w", id, err)
	}
	d.log.Info("import: every shard reloaded with its part of the data", keyDatabase, id, "shards", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// beginImport registers an import into database id, so that Stop and Remove end it (see
// endImport) and the reconciler does not wait for it (see lockUnlessImporting), then
// takes the database's lock. done releases both.
func (d *Driver) beginImport(ctx context.Context, id int) (_ context.Context, done func(), _ error) {
	ctx, cancel := context.WithCancelCause(ctx)
	d.mu.Lock()
	d.imports[id] = cancel
	d.mu.Unlock()
	forget := func() {
		d.mu.Lock()
		delete(d.imports, id)
		d.mu.Unlock()
		cancel(nil)
	}
	unlock, err := d.lock(ctx, id)
	if err != nil {
		forget()
		return nil, nil, context.Cause(ctx)
	}
	return ctx, func() {
		unlock()
		forget()
	}, nil
}

// reloadTarget is the primary of one shard, which reloads the shard's data.
type reloadTarget struct {
	n node
	c *redis.Client // as the internal user
}

// reloadTarget finds shard s's primary and checks that it may reload (DEBUG): servers
// started before clouddb's cluster nodes allowed it do not until they restart
// (enable-debug-command is fixed at start), and then errSlowLoad.
func (d *Driver) reloadTarget(ctx context.Context, in clouddb.Instance, topo topology, s int) (reloadTarget, error) {
	for _, idx := range []int{2 * s, 2*s + 1} {
		n := d.nodeOf(in.DatabaseID, idx)
		pid := d.livePid(n)
		if pid == 0 {
			continue
		}
		c, err := d.probe(ctx, n, topo.Ports[idx].Port, cred{internalUser, d.internalSecret(in.DatabaseID)}, pid)
		if err != nil {
			continue
		}
		info, err := c.Info(ctx, "replication").Result()
		if err != nil || infoField(info, "role") != "master" {
			c.Close()
			continue
		}
		v, err := c.ConfigGet(ctx, "enable-debug-command").Result()
		if err != nil {
			c.Close()
			return reloadTarget{}, fmt.Errorf("database %d: shard %d: CONFIG GET: %w", in.DatabaseID, s, classify(err))
		}
		if v["enable-debug-command"] == "no" {
			c.Close()
			d.log.Info("import: a shard's primary started before reloads were allowed; the data is copied key by key", keyDatabase, in.DatabaseID, keyNode, idx)
			return reloadTarget{}, errSlowLoad
		}
		return reloadTarget{n: n, c: c}, nil
	}
	return reloadTarget{}, fmt.Errorf("database %d: shard %d has no primary running", in.DatabaseID, s)
}

// slotOwners maps each hash slot to the shard of n that serves it (see slotRange).
func slotOwners(n int) *[clusterSlots]uint16 {
	var owner [clusterSlots]uint16
	for s := range n {
		lo, hi := slotRange(s, n)
		for slot := lo; slot <= hi; slot++ {
			owner[slot] = uint16(s)
		}
	}
	return &owner
}

// checkShardFiles loads each shard's file into a throwaway server (a few at a time: each
// takes a core) and refuses one that does not load (ErrDataCorrupt) or needs more
// memory than its shard's share of the limit (ErrDataTooLarge).
func (d *Driver) checkShardFiles(ctx context.Context, in clouddb.Instance, files []string) error {
	limit := in.MaxMemoryBytes / int64(len(files))
	cfg := d.loadConfig(in)
	cfg.MaxMemory = limit
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.NumCPU()))
	for s, f := range files {
		g.Go(func() error {
			t, err := redisdata.LoadRDB(gctx, cfg, f)
			if err != nil {
				if errors.Is(err, redisdata.ErrCorrupt) {
					return fmt.Errorf("%w: shard %d's part: %v", clouddb.ErrDataCorrupt, s, err)
				}
				return err
			}
			defer t.Close()
			used, err := t.UsedMemory(gctx)
			if err != nil {
				return err
			}
			if limit > 0 && used > limit {
				lo, hi := slotRange(s, len(files))
				return fmt.Errorf("%w: shard %d (slots %d-%d) would need about %d bytes, its share of the limit is %d",
					clouddb.ErrDataTooLarge, s, lo, hi, used, limit)
			}
			return nil
		})
	}
	return g.Wait()
}

// reloadShard replaces the data of a shard's primary with that of file, checked. The file
// becomes the node's RDB file and the node loads it in place of its data; with
// replication its replica then resyncs in full (a new replication ID refuses it the
// partial resync that would keep its old data); the node's persistence then holds the
// new data (a rewritten AOF, or the file itself as the snapshot).
func (d *Driver) reloadShard(ctx context.Context, in clouddb.Instance, topo topology, t reloadTarget, file string) error {
	id := in.DatabaseID
	// DEBUG RELOAD answers once the data is loaded, which takes as long as the file.
	c := t.c.WithTimeout(time.Hour)
	fail := func(what string, err error) error {
		return fmt.Errorf("shard of node %d: %s: %w", t.n.idx, what, classify(err))
	}
	// A background save under way or starting would rename an older snapshot over the
	// file between its move and the reload: snapshots stop until the node is
	// reconfigured below.
	if err := c.ConfigSet(ctx, "save", "").Err(); err != nil {
		return fail("CONFIG SET save", err)
	}
	deadline := time.Now().Add(d.stopTimeout)
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return fail("INFO persistence", err)
		}
		if infoField(info, "rdb_bgsave_in_progress") == "0" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shard of node %d: a background save did not end within %s", t.n.idx, d.stopTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	dump := filepath.Join(t.n.dir, rdbFile)
	if err := os.Rename(file, dump); err != nil {
		return err
	}
	if err := c.Do(ctx, "debug", "reload", "nosave").Err(); err != nil {
		return fail("DEBUG RELOAD", err)
	}
	if in.Replication {
		if err := c.Do(ctx, "debug", "change-repl-id").Err(); err != nil {
			return fail("DEBUG CHANGE-REPL-ID", err)
		}
		if err := c.Do(ctx, "client", "kill", "type", "replica").Err(); err != nil {
			return fail("CLIENT KILL TYPE replica", err)
		}
	}
	if err := d.reconfigure(ctx, t.c, d.clusterServer(in, t.n.idx, topo.Ports[t.n.idx])); err != nil {
		return err
	}
	p := persistences[in.DataPersistence]
	switch {
	case p.appendonly == "yes":
		if err := c.Do(ctx, "bgrewriteaof").Err(); err != nil {
			return fail("BGREWRITEAOF", err)
		}
	case p.save == "":
		if err := os.Remove(dump); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("import: cannot remove the file a shard loaded", keyDatabase, id, keyNode, t.n.idx, "error", err)
		}
	}
	return nil
}

// ctxReader ends a read once ctx is done: Stop or Remove end an import that is being
// split.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, context.Cause(r.ctx)
	}
	return r.r.Read(p)
}
