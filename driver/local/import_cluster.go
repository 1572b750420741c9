package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"clouddb"
	"clouddb/redisdata"
)

// loadCluster imports into an OSS Cluster by a reload of each shard. The parts are split
// by hash slot, as they are read, into one file per shard (redisdata.SplitRDB). Each
// file is loaded as it is written by a throwaway server of the database's version that
// checks every value (sanitize-dump-payload) and is measured against the shard's share of
// the memory limit.
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
		t, terr := d.reloadTarget(ctx, in, topo, s)
		if terr != nil {
			return terr
		}
		targets = append(targets, t)
	}

	// Each shard's part goes to a file, which its primary reloads at the end, and to a
	// throwaway server that checks it as it is split.
	limit := in.MaxMemoryBytes / int64(n)
	cfg := d.loadConfig(in)
	cfg.MaxMemory = limit
	files := make([]*os.File, n)
	loaders := make([]*redisdata.Loader, n)
	outs := make([]io.Writer, n)
	defer func() {
		for s := range n {
			if files[s] != nil {
				files[s].Close()
				os.Remove(files[s].Name())
			}
			if loaders[s] != nil {
				loaders[s].Abort()
			}
		}
	}()
	for s := range n {
		if files[s], err = os.CreateTemp(d.dir, ".import-*.rdb"); err != nil {
			return err
		}
		if loaders[s], err = redisdata.StartLoad(ctx, cfg); err != nil {
			return fmt.Errorf("database %d: start the server that checks shard %d's part: %w", id, s, err)
		}
		outs[s] = io.MultiWriter(files[s], loaders[s])
	}
	owner := slotOwners(n)
	readers := make([]io.Reader, len(parts))
	for i, p := range parts {
		readers[i] = ctxReader{ctx, p}
	}
	// Until the reloads, a shard's primary that dies ends the import: the reconciler,
	// which waits for no import, brings it back (or fails over) once it has ended.
	stopWatch := d.watchTargets(ctx, id, targets)
	defer stopWatch()
	// A checking server whose memory passes its shard's share is stopped then, as the
	// swap's loading server is at the limit (see watchLoad): under its address-space cap
	// alone, each shard's would take up to twice its share and 256 MB.
	over := make([]atomic.Int64, n)
	stopMemWatch := d.watchLoaders(ctx, slices.Clone(loaders), limit, over)
	defer stopMemWatch()
	// The split runs beside: a source that stalls must not hold the import when Stop or
	// Remove end it (they wait for the lock), nor does a bug met on one tenant's file
	// end the process. What it still reads or writes after an end fails (the files are
	// closed, the checking servers gone) and ends it once its read returns.
	split := make(chan error, 1)
	go func() {
		defer func() {
			if p := clouddb.Recovered(recover()); p != nil {
				split <- p
			}
		}()
		split <- redisdata.SplitRDB(outs, func(slot int) int { return int(owner[slot]) }, readers)
	}()
	select {
	case err = <-split:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	stopMemWatch()
	for _, f := range files {
		if cerr := f.Close(); err == nil {
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
	case err != nil && !errors.Is(err, syscall.EPIPE):
		return err
	}
	// Split (or a checking server stopped reading: its verdict says why).
	if verr := d.checkShardParts(ctx, in, loaders, over); verr != nil {
		if len(parts) > 1 && errors.Is(verr, clouddb.ErrDataCorrupt) {
			d.log.Info("import: the parts did not load together; loading them one by one", keyDatabase, id, "why", verr)
			return errSlowLoad
		}
		return verr
	}
	if err != nil {
		return err
	}
	stopWatch()
	if ctx.Err() != nil {
		// Ended (Stop, Remove, the caller, a primary's death) before any shard was touched.
		return context.Cause(ctx)
	}

	// Every shard's primary stops its persistence first, and its background save
	// under way must end: one that does not (or a primary that does not answer) fails
	// the import before any shard's data is replaced, not after some were.
	tctx := context.WithoutCancel(ctx)
	var pg errgroup.Group
	for _, t := range targets {
		pg.Go(clouddb.Guard(func() error { return d.prepareReload(ctx, in, t) }))
	}
	if err := pg.Wait(); err != nil {
		for _, t := range targets {
			if rerr := d.reconfigure(tctx, t.c, d.clusterServer(in, t.n.idx, topo.Ports[t.n.idx])); rerr != nil {
				d.log.Warn("import: a shard did not get its persistence back; the reconciler will", keyDatabase, id, keyNode, t.n.idx, "error", rerr)
			}
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("database %d: no shard was touched: %w", id, err)
	}

	// Once begun, the reloads run to their end (see loadSwap's takeover): every shard
	// gets its file, and Stop waits for the lock.
	start := time.Now()
	var g errgroup.Group
	for s, t := range targets {
		g.Go(clouddb.Guard(func() error { return d.reloadShard(tctx, in, topo, t, files[s].Name()) }))
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("database %d: the import reached some shards only, which may hold the data of before: %w", id, err)
	}
	if in.Replication {
		var wg sync.WaitGroup
		for _, t := range targets {
			wg.Go(func() {
				// Only a wait: a panic in it is logged, the import done.
				if err := clouddb.Guard(func() error { d.waitShardReplica(ctx, in, t); return nil })(); err != nil {
					d.log.Error("import: the wait for a shard's replica panicked", keyDatabase, in.DatabaseID, keyNode, t.n.idx, "error", err)
				}
			})
		}
		wg.Wait()
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
	n   node
	pid int
	c   *redis.Client // as the internal user
}

// watchTargets ends the import into database id (see endImport) when one of the targets'
// processes is gone, until the returned function is called (which waits for the watch
// to end; calling it again does nothing).
func (d *Driver) watchTargets(ctx context.Context, id int, targets []reloadTarget) func() {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer func() {
			// A bug in the watch ends this import, not the process.
			if p := clouddb.Recovered(recover()); p != nil {
				d.endImport(id, p)
			}
		}()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for s, t := range targets {
				if gone(t.pid) {
					d.endImport(id, fmt.Errorf("database %d: shard %d's primary (node %d, pid %d) exited during the import, which is abandoned",
						id, s, t.n.idx, t.pid))
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-ended
		})
	}
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
		return reloadTarget{n: n, pid: pid, c: c}, nil
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

// checkShardParts waits for each shard's checking server to load its part and refuses
// one that did not load (ErrDataCorrupt) or needs more memory than its shard's share of
// the limit (ErrDataTooLarge, also when its server could not allocate it). The servers
// are stopped. Every verdict is waited for: when one server stopped reading, the split
// stopped and the others got their parts cut short, which they call corrupt; the
// verdict returned is a too-large one first, then the first other one.
//
// over[s], when not 0, is the memory at which watchLoaders stopped shard s's server.
func (d *Driver) checkShardParts(ctx context.Context, in clouddb.Instance, loaders []*redisdata.Loader, over []atomic.Int64) error {
	limit := in.MaxMemoryBytes / int64(len(loaders))
	errs := make([]error, len(loaders))
	var g errgroup.Group
	for s, l := range loaders {
		loaders[s] = nil // Finish stops it, or hands it over
		g.Go(func() error {
			errs[s] = clouddb.Guard(func() error { return d.checkShardPart(ctx, s, len(loaders), limit, l) })()
			if used := over[s].Load(); used > 0 {
				lo, hi := slotRange(s, len(loaders))
				errs[s] = fmt.Errorf("%w: shard %d (slots %d-%d) needs more than %d bytes, its share of the limit is %d",
					clouddb.ErrDataTooLarge, s, lo, hi, used, limit)
			}
			return nil
		})
	}
	_ = g.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	for _, err := range errs {
		if errors.Is(err, clouddb.ErrDataTooLarge) {
			return err
		}
	}
	return errors.Join(errs...)
}

// checkShardPart is checkShardParts for shard s of n.
func (d *Driver) checkShardPart(ctx context.Context, s, n int, limit int64, l *redisdata.Loader) error {
	lo, hi := slotRange(s, n)
	t, err := l.Finish(ctx)
	switch {
	case errors.Is(err, redisdata.ErrOutOfMemory):
		return fmt.Errorf("%w: shard %d (slots %d-%d) needs more memory than its share of the limit, %d bytes, allows (%v)",
			clouddb.ErrDataTooLarge, s, lo, hi, limit, err)
	case errors.Is(err, redisdata.ErrCorrupt):
		return fmt.Errorf("%w: shard %d's part: %v", clouddb.ErrDataCorrupt, s, err)
	case err != nil:
		return err
	}
	defer t.Close()
	used, err := t.UsedMemory(ctx)
	if err != nil {
		return err
	}
	if limit > 0 && used > limit {
		return fmt.Errorf("%w: shard %d (slots %d-%d) would need about %d bytes, its share of the limit is %d",
			clouddb.ErrDataTooLarge, s, lo, hi, used, limit)
	}
	return nil
}

// prepareReload stops the persistence of a shard's primary before reloadShard: the AOF
// stops following the data (a rewrite under way, of the data of before, ends too) until
// it is written anew from the new data; snapshots stop, and the one under way must end
// (a background save would rename an older snapshot over the file between its move and
// the reload). reconfigure restores both.
func (d *Driver) prepareReload(ctx context.Context, in clouddb.Instance, t reloadTarget) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("shard of node %d: %s: %w", t.n.idx, what, classify(err))
	}
	if persistences[in.DataPersistence].Appendonly == "yes" {
		if err := t.c.ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
			return fail("CONFIG SET appendonly no", err)
		}
	}
	if err := t.c.ConfigSet(ctx, "save", "").Err(); err != nil {
		return fail("CONFIG SET save", err)
	}
	if err := waitNoBGSave(ctx, t.c, d.stopTimeout); err != nil {
		return fail("the background save under way", err)
	}
	return nil
}

// reloadShard replaces the data of a shard's primary (prepared: see prepareReload) with
// that of file, checked. The file becomes the node's RDB file and the node loads it in
// place of its data; with replication its replica then resyncs in full (a new
// replication ID refuses it the partial resync that would keep its old data). It returns once the node's persistence
// holds the new data: the file itself is the snapshot; an AOF is written anew from it
// (until then the AOF on disk holds the data of before, which a restart would load).
// One that fails gives the node its persistence back first: left with snapshots or the
// AOF off until the reconciler's next Ensure, it would lose its writes at a crash then.
func (d *Driver) reloadShard(ctx context.Context, in clouddb.Instance, topo topology, t reloadTarget, file string) (err error) {
	id := in.DatabaseID
	// DEBUG RELOAD answers once the data is loaded, which takes as long as the file.
	c := t.c.WithTimeout(time.Hour)
	fail := func(what string, err error) error {
		return fmt.Errorf("shard of node %d: %s: %w", t.n.idx, what, classify(err))
	}
	defer func() {
		if err == nil {
			return
		}
		if rerr := d.reconfigure(ctx, t.c, d.clusterServer(in, t.n.idx, topo.Ports[t.n.idx])); rerr != nil {
			d.log.Warn("import: a shard whose reload failed did not get its persistence back; the reconciler will", keyDatabase, id, keyNode, t.n.idx, "error", rerr)
		}
	}()
	aof := persistences[in.DataPersistence].Appendonly == "yes"
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
	// The node's settings again: snapshots, and the AOF, which starts with a rewrite
	// that reconfigure waits for (see applyLive).
	if err := d.reconfigure(ctx, t.c, d.clusterServer(in, t.n.idx, topo.Ports[t.n.idx])); err != nil {
		return err
	}
	if p := persistences[in.DataPersistence]; !aof && p.Save == "" {
		if err := os.Remove(dump); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("import: cannot remove the file a shard loaded", keyDatabase, id, keyNode, t.n.idx, "error", err)
		}
	}
	return nil
}

// waitShardReplica waits until the replica of t's shard, if it runs, has resynced with
// the data t reloaded. Until its full resync has begun, the replica holds the data of
// before and is promotable (its link was up): a primary that died then would fail over
// to it. Done means on the replica too, as it means persisted. ctx (Stop, Remove) ends
// the wait: the data is on the primary.
func (d *Driver) waitShardReplica(ctx context.Context, in clouddb.Instance, t reloadTarget) {
	r := d.nodeOf(in.DatabaseID, t.n.idx^1)
	if d.livePid(r) == 0 {
		return
	}
	if err := waitReplicaOnline(ctx, t.c, replicaSyncWait); err != nil {
		d.log.Warn("import: a shard's replica has not resynced with the new data; a failover now would bring back the old",
			keyDatabase, in.DatabaseID, keyNode, r.idx, "error", err)
	}
}

// replicaSyncWait bounds reloadShard's wait for a shard's replica to resync in full.
const replicaSyncWait = 5 * time.Minute

// waitReplicaOnline polls the primary behind c until a replica is connected to it and
// online (its full sync done), up to within.
func waitReplicaOnline(ctx context.Context, c *redis.Client, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "slave") && strings.Contains(line, "state=online") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no replica online within %s", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitNoBGSave polls INFO persistence until no background save runs, up to within.
func waitNoBGSave(ctx context.Context, c *redis.Client, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		if infoField(info, "rdb_bgsave_in_progress") == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %s", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// watchLoaders polls the memory of each loader's server while it loads and stops one
// that passes limit (nothing when limit is 0), recording in over[s] the memory it had,
// until the returned function is called (once it returns, no server is stopped; calling
// it again does nothing).
//
// Each server has its own watch: one that waits in a read of its pipe (its part gets no
// bytes for a while) answers nothing until it reads again, and its question is not
// waited for: it fails once the server is stopped (Finish, Abort).
func (d *Driver) watchLoaders(ctx context.Context, loaders []*redisdata.Loader, limit int64, over []atomic.Int64) func() {
	wctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex // held to stop a server, and to end the watch
	if limit > 0 {
		for s, l := range loaders {
			go func() {
				// A bug in the watch ends the watch; the address-space cap still bounds
				// the server.
				defer func() {
					if p := clouddb.Recovered(recover()); p != nil {
						d.log.Error("import: a checking server's memory watch panicked", "panic", p.Value, "stack", string(p.Stack))
					}
				}()
				for wctx.Err() == nil {
					if used, err := l.UsedMemory(wctx); err == nil && used > limit {
						mu.Lock()
						if wctx.Err() == nil {
							over[s].Store(used)
							l.Kill()
						}
						mu.Unlock()
						return
					}
					select {
					case <-wctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()
		}
	}
	return func() {
		mu.Lock()
		cancel()
		mu.Unlock()
	}
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
