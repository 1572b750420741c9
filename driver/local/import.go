package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb"
	"clouddb/redisdata"
)

// An import into a database that is not a cluster takes the swap (see loadSwap): the
// database's next server loads the file itself, once, at the speed of redis' own loader.
// The other way, a throwaway server that loads the file to check it and a copy of every
// key from there (DUMP, RESTORE), took five times as long as the load alone. A cluster
// reloads each shard from its part of the data, split by slot (see loadCluster).

// The causes with which Stop and Remove end an import under way.
var (
	errImportStopped = errors.New("the database was stopped during the import")
	errImportRemoved = errors.New("the database was deleted during the import")
)

// errImporting: an import holds the database's servers (see loadSwap). It is a wait to
// the reconciler (ErrServerStarting): the import answers for the servers until it ends,
// and abandons itself if the primary dies, so that the reconciler brings it back.
var errImporting = fmt.Errorf("an import is under way (%w)", clouddb.ErrServerStarting)

// importing reports whether an import into database id is under way.
func (d *Driver) importing(id int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.imports[id] != nil
}

// lockUnlessImporting is lock for the reconciler's calls, which must not wait for an
// import: one that trickles in from a slow source holds the database for as long as
// --data-timeout, and each waiting call holds one of the reconciler's slots, which a few
// dozen such imports would exhaust for every tenant. While an import is under way it
// returns errImporting at once.
func (d *Driver) lockUnlessImporting(ctx context.Context, id int) (func(), error) {
	for {
		if d.importing(id) {
			return nil, errImporting
		}
		// Free, as it nearly always is when the reconciler asks each second: no timer.
		if unlock, ok := d.tryLock(id); ok {
			return unlock, nil
		}
		// Else a short wait at a time, so that an import that takes the lock meanwhile
		// is noticed.
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		unlock, err := d.lock(wctx, id)
		cancel()
		if err == nil {
			return unlock, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// endImport ends the import under way into database id, if any, with cause.
func (d *Driver) endImport(id int, cause error) {
	d.mu.Lock()
	cancel := d.imports[id]
	d.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// errSlowLoad: the files cannot take the swap; Load copies them key by key instead.
var errSlowLoad = errors.New("the files take the key-by-key copy")

// loadFast imports files by a swap, merging several parts into one file first (see
// joinParts), or into a cluster by a reload of each shard (see loadCluster). Parts that cannot be merged, or whose merged file the server
// refuses (a key in two parts, a part that does not load), return errSlowLoad: loaded
// one by one, later parts overwrite earlier ones' keys, and a bad part is named.
func (d *Driver) loadFast(ctx context.Context, in clouddb.Instance, files []string) error {
	if len(files) == 0 {
		return errSlowLoad
	}
	if in.OSSCluster {
		parts, closeParts, err := openParts(files)
		if err != nil {
			return err
		}
		defer closeParts()
		return d.loadCluster(ctx, in, parts)
	}
	file := files[0]
	if len(files) > 1 {
		merged, err := os.CreateTemp(d.dir, ".import-*.rdb")
		if err != nil {
			return err
		}
		defer os.Remove(merged.Name())
		err = joinParts(merged, files)
		if cerr := merged.Close(); err == nil {
			err = cerr
		}
		if errors.Is(err, redisdata.ErrCorrupt) || errors.Is(err, redisdata.ErrNotMergeable) {
			d.log.Info("import: the parts are loaded one by one", keyDatabase, in.DatabaseID, "why", err)
			return errSlowLoad
		}
		if err != nil {
			return err
		}
		file = merged.Name()
	}
	err := d.loadSwap(ctx, in, loadSource{file: file})
	if len(files) > 1 && errors.Is(err, clouddb.ErrDataCorrupt) {
		d.log.Info("import: the merged parts did not load; loading them one by one", keyDatabase, in.DatabaseID, "why", err)
		return errSlowLoad
	}
	return err
}

// loadSwap replaces the data of a database that is not a cluster with that of the RDB
// file rdb. A new server of the database, on its other node (a replica's server gives
// way: it holds nothing the primary does not), starts on the file while the primary
// goes on serving the old data. It loads with sanitize-dump-payload yes, so that redis
// checks every value deeply as it reads it, and is watched as it loads: it is killed as
// soon as its memory passes the database's limit. Only a server that loaded the whole
// file within the limit takes over: the primary stops, the new server takes its port as
// at a failover (see promote) and the database's persistence, and the old primary's
// node becomes the new replica, or goes. A file that fails leaves the primary serving
// the data it had, untouched.
func (d *Driver) loadSwap(ctx context.Context, in clouddb.Instance, src loadSource) error {
	id := in.DatabaseID
	// The lock is held while the file loads, which a slow source makes long: Stop and
	// Remove end the import rather than wait (see endImport), and the reconciler's
	// calls do not wait for it (see lockUnlessImporting).
	ctx, done, err := d.beginImport(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	topo, err := d.readTopology(id)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if topo.Shards != 0 {
		return errSlowLoad
	}
	p := d.nodeOf(id, topo.Primary)
	r := d.other(p)
	ppid := d.livePid(p)
	if ppid == 0 {
		return fmt.Errorf("database %d: its server is not running", id)
	}
	served, known := servedOnDisk(p.dir)
	version, bin, err := d.versionFor(in, served, known)
	if err != nil {
		return err
	}
	if known && served != version && d.bins[served] != "" {
		// The import does not upgrade: Ensure does, with its checks.
		version, bin = served, d.bins[served]
	}
	if in.TLS != nil {
		if err = d.prepareTLS(in); err != nil {
			return fmt.Errorf("database %d: %w", id, err)
		}
	}

	if err = d.removeNode(ctx, r); err != nil {
		return err
	}
	// On failure the other node is cleared and, with replication, a replica starts
	// there again at once rather than at the reconciler's next look.
	failed := func(cause error) error {
		bg := context.WithoutCancel(ctx)
		if rerr := d.removeNode(bg, r); rerr != nil {
			d.log.Warn("import: cannot remove the server that loaded the file", keyDatabase, id, keyNode, r.idx, "error", rerr)
		} else if in.Replication && ctx.Err() == nil && d.livePid(p) == ppid {
			if merr := makeDir(r.dir); merr == nil {
				if serr := d.ensureServer(bg, d.replicaServer(in, r)); serr != nil {
					d.log.Warn("import: the replica did not start again; the reconciler will", keyDatabase, id, "error", serr)
				}
			}
		}
		return cause
	}
	if err = makeDir(r.dir); err != nil {
		return failed(fmt.Errorf("database %d: %w", id, err))
	}
	staged := d.primaryServer(in, r)
	conf := d.configOf(staged)
	conf.Port = 0             // the socket only, until it takes over the port
	conf.Persistence = "none" // it loads the file; the database's persistence comes with the port
	if err = d.writeConfig(r, conf); err != nil {
		return failed(fmt.Errorf("database %d: write %s: %w", id, confFile, err))
	}
	dump := filepath.Join(r.dir, rdbFile)
	linked := false
	if src.r != nil {
		// The server reads the stream through a named pipe as its RDB file.
		if err = syscall.Mkfifo(dump, 0o600); err != nil {
			return failed(fmt.Errorf("database %d: %w", id, err))
		}
	} else {
		// A hard link is the data file itself for snapshot persistence; across file
		// systems a symbolic link does for the load, and a background save makes the file.
		linked = os.Link(src.file, dump) == nil
		if !linked {
			var abs string
			if abs, err = filepath.Abs(src.file); err == nil {
				err = os.Symlink(abs, dump)
			}
			if err != nil {
				return failed(fmt.Errorf("database %d: %w", id, err))
			}
		}
	}
	pid, ch, serr := d.spawn(id, r.dir, bin, "--sanitize-dump-payload", "yes",
		"--loading-process-events-interval-bytes", strconv.Itoa(loadEventsEvery))
	if serr != nil {
		return failed(fmt.Errorf("database %d: %w", id, serr))
	}
	if werr := writeFile(filepath.Join(r.dir, pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o600, false); werr != nil {
		d.log.Warn("cannot write pid file", keyDatabase, id, keyPid, pid, "error", werr)
	}
	if err := redisdata.CapAddressSpace(pid, in.MaxMemoryBytes); err != nil {
		if kerr := d.kill(context.WithoutCancel(ctx), id, pid); kerr != nil {
			d.log.Warn("import: cannot kill the server that loaded the file", keyDatabase, id, keyPid, pid, "error", kerr)
		}
		return failed(fmt.Errorf("database %d: limit the memory of the server that loads the file: %w", id, err))
	}
	d.log.Info("import: a new server loads the file", keyDatabase, id, keyNode, r.idx, keyPid, pid)
	var f *feeder
	if src.r != nil {
		f = &feeder{path: dump, r: src.r, ch: ch, pid: pid}
		go f.run(ctx)
	}
	c, werr := d.watchLoad(ctx, in, r, pid, ch, conf.InternalSecret, ppid)
	if ferr := f.failure(); ferr != nil {
		// The stream failed (the server then saw it end early): that is the cause.
		if c != nil {
			c.Close()
			if kerr := d.kill(context.WithoutCancel(ctx), id, pid); kerr != nil {
				d.log.Warn("import: cannot kill the server that loaded the file", keyDatabase, id, keyPid, pid, "error", kerr)
			}
		}
		return failed(ferr)
	}
	if werr != nil {
		return failed(werr)
	}
	defer c.Close()
	if err := redisdata.LiftAddressSpace(pid); err != nil {
		return failed(fmt.Errorf("database %d: lift the memory limit of the server that loaded the file: %w", id, err))
	}
	if !linked || in.DataPersistence == "none" || persistences[in.DataPersistence].Appendonly == "yes" {
		// Loaded; only a hard link under snapshot persistence is still the data's file (a
		// pipe's name is gone already).
		if err := os.Remove(dump); err != nil && !errors.Is(err, os.ErrNotExist) {
			return failed(fmt.Errorf("database %d: %w", id, err))
		}
		linked = false
	}
	if err := recordVersion(r.dir, version); err != nil {
		return failed(fmt.Errorf("database %d: %w", id, err))
	}
	if d.testHook != nil {
		d.testHook(hookImportLoaded, id, pid)
	}
	if ctx.Err() != nil {
		// Ended (Stop, Remove, the caller) before the takeover: the old data stays.
		return failed(context.Cause(ctx))
	}

	// The takeover. From the primary's stop on, the new server holds the database's
	// only data: nothing below removes it. Whatever fails is finished by Ensure: the
	// topology (or, before it is written, failover, which takes a node serving as a
	// primary) makes it the primary. Once begun, the takeover is not ended halfway by
	// Stop or the caller (they wait for the lock): a new server left on the socket with
	// no persistence, its predecessor killed, would lose both the old data and the new
	// at the stop that follows.
	tctx := context.WithoutCancel(ctx)
	// The topology first: a crash from here on finds the new server the primary, which
	// Ensure adopts (removing or demoting the old one, which frees the port); before
	// it, failover never takes the new server for a replica cut short in its promotion
	// (see failover), so the old data stays.
	if err := d.writeTopology(id, topology{Primary: r.idx}); err != nil {
		return failed(fmt.Errorf("database %d: %w", id, err))
	}
	if err := d.shutdownNoSave(tctx, p, ppid); err != nil {
		return fmt.Errorf("database %d: stop the server of the old data: %w", id, err)
	}
	if err := d.promote(tctx, c, in); err != nil {
		return fmt.Errorf("database %d: the server with the imported data takes over the port: %w", id, err)
	}
	if err := d.reconfigure(tctx, c, staged); err != nil {
		return err
	}
	if !linked && persistences[in.DataPersistence].Save != "" {
		if err := d.bgsave(tctx, c); err != nil {
			return fmt.Errorf("database %d: %w", id, err)
		}
	}
	d.log.Info("import: the server with the imported data took over", keyDatabase, id, keyNode, r.idx, keyPid, pid, keyPort, in.Port)
	if d.testHook != nil {
		d.testHook(hookImportTookOver, id, pid)
	}
	d.syncSources(staged, bin)
	// The import is done: the database serves the imported data. What is left, the old
	// node's files and the new replica, the reconciler finishes if it fails here (ended
	// by Stop or the caller, a replica slow to start); the import does not fail for it.
	if err := d.removeNode(ctx, p); err != nil {
		d.log.Warn("import: cannot remove the node of the old data; the reconciler will", keyDatabase, id, keyNode, p.idx, "error", err)
		return nil
	}
	if in.Replication {
		err := makeDir(p.dir)
		if err == nil {
			err = d.ensureServer(ctx, d.replicaServer(in, p))
		}
		if err != nil {
			d.log.Warn("import: the replica did not start again; the reconciler will", keyDatabase, id, keyNode, p.idx, "error", err)
		}
	}
	return nil
}

// loadEventsEvery is how many bytes of the file the loading server reads between two
// looks at its connections, when it answers the memory question of watchLoad (redis'
// default is 2 MB). Memory grows faster than the file is read where values are
// compressed (LZF: about 90 times at most), so a smaller step bounds how far past the
// limit a file gets before the server is stopped; each look costs a few microseconds.
const loadEventsEvery = 128 << 10

// loadSource is what a swap loads: a file, or a stream.
type loadSource struct {
	file string
	r    io.Reader
}

// feeder copies a stream into the named pipe the loading server reads its RDB file from.
type feeder struct {
	path string
	r    io.Reader
	ch   *child // the loading server
	pid  int

	mu  sync.Mutex
	err error // why the stream failed, once it has
}

// run opens the pipe once the server has (a server that exits first is left to its
// verdict) and copies the stream into it until the stream ends, fails, or the server
// stops reading (it refused the file or was stopped: its verdict is the caller's). The
// stream's failure is recorded before the pipe closes, so that a server that then exits
// for the early end of its file is seen after it.
func (f *feeder) run(ctx context.Context) {
	defer func() {
		// A bug met on one tenant's stream fails that import, not the process.
		if p := clouddb.Recovered(recover()); p != nil {
			f.fail(p)
			_ = syscall.Kill(f.pid, syscall.SIGKILL)
		}
	}()
	var w *os.File
	for w == nil {
		var err error
		w, err = os.OpenFile(f.path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENXIO) { // ENXIO: the server has not opened it yet
			// The server would wait for a writer for ever.
			f.fail(fmt.Errorf("open the pipe to the server: %w", err))
			_ = syscall.Kill(f.pid, syscall.SIGKILL)
			return
		}
		select {
		case <-f.ch.done:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
	defer w.Close()
	redisdata.GrowPipe(w)
	// The server has the pipe open: its name goes, so that nothing can open it again. A
	// server that fails to load its file opens it again to check it (redis-check-rdb)
	// and would wait there for a writer for ever.
	if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.fail(fmt.Errorf("remove the pipe's name: %w", err))
		_ = syscall.Kill(f.pid, syscall.SIGKILL)
		return
	}
	buf := make([]byte, 1<<20)
	for {
		n, rerr := f.r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
		}
		if rerr == io.EOF {
			return
		}
		if rerr != nil {
			f.fail(rerr)
			return
		}
	}
}

func (f *feeder) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// failure is why the stream failed, nil if it has not (or there is no feeder).
func (f *feeder) failure() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// LoadStream replaces the data with that of the RDB file read from r: a database that is
// not a cluster loads it as it arrives, by a swap (see loadSwap) whose server reads it
// through a named pipe; a cluster splits it as it arrives (see loadCluster), keeping a
// copy in case the data must be copied key by key after all.
func (d *Driver) LoadStream(ctx context.Context, in clouddb.Instance, r io.Reader) error {
	if !in.OSSCluster {
		if err := d.loadSwap(ctx, in, loadSource{r: r}); !errors.Is(err, errSlowLoad) {
			return err
		}
	}
	tmp, err := os.CreateTemp(d.dir, ".import-*.rdb")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if in.OSSCluster {
		if lerr := d.loadCluster(ctx, in, []io.Reader{io.TeeReader(r, tmp)}); !errors.Is(lerr, errSlowLoad) {
			return lerr
		}
	}
	// The rest of the stream (all of it, or what the split did not read).
	_, err = io.CopyBuffer(tmp, r, make([]byte, 1<<20))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return d.loadKeys(ctx, in, []string{tmp.Name()})
}

// watchLoad waits until the server pid on node n has loaded its file and answers, and
// returns a client of it. It asks the server's memory use every few milliseconds as it
// loads (INFO answers while loading), and kills it once the data passes the limit: a
// small file can unpack to much more memory than its size. A server that exits failed to
// load the file: its log says why.
func (d *Driver) watchLoad(ctx context.Context, in clouddb.Instance, n node, pid int, ch *child, secret string, serving int) (*redis.Client, error) {
	id := in.DatabaseID
	var c *redis.Client
	closeClient := func() {
		if c != nil {
			c.Close()
		}
	}
	fail := func(err error) (*redis.Client, error) {
		closeClient()
		if kerr := d.kill(context.WithoutCancel(ctx), id, pid); kerr != nil {
			d.log.Warn("import: cannot kill the server that loaded the file", keyDatabase, id, keyPid, pid, "error", kerr)
		}
		return nil, err
	}
	exited := func() (*redis.Client, error) {
		closeClient()
		ch.waitLog()
		data, _ := os.ReadFile(filepath.Join(n.dir, logFile))
		if oom := redisdata.OutOfMemory(string(data)); oom != "" {
			// Past the address space of redisdata.CapAddressSpace: a value far larger than its file.
			return nil, fmt.Errorf("%w: the data needs more memory than the limit of %d bytes allows (%s)", clouddb.ErrDataTooLarge, in.MaxMemoryBytes, oom)
		}
		if err := redisdata.LoadFailure(string(data)); err != nil {
			return nil, fmt.Errorf("%w: %w", clouddb.ErrDataCorrupt, err)
		}
		return nil, fmt.Errorf("database %d: the server loading the file exited (%s): %s", id, exitText(ch.err), logTail(n.dir))
	}
	wait := time.Millisecond
	for {
		select {
		case <-ch.done:
			return exited()
		default:
		}
		info, err := loadInfo(ctx, d, n, &c, secret)
		if err == nil {
			used, perr := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
			if perr != nil {
				return fail(fmt.Errorf("database %d: INFO memory: no used_memory", id))
			}
			if in.MaxMemoryBytes > 0 && used > in.MaxMemoryBytes {
				return fail(fmt.Errorf("%w: the data needs more than %d bytes, the limit is %d", clouddb.ErrDataTooLarge, used, in.MaxMemoryBytes))
			}
			if infoField(info, "loading") == "0" {
				return c, nil
			}
		}
		if gone(serving) {
			// The reconciler brings the database back (or fails over to its replica):
			// it must not wait for the import.
			return fail(fmt.Errorf("database %d: its server (pid %d) exited during the import, which is abandoned", id, serving))
		}
		select {
		case <-ch.done:
			return exited()
		case <-ctx.Done():
			return fail(context.Cause(ctx))
		case <-time.After(wait):
			// Fast at first (a small file loads in milliseconds), then every 10ms:
			// a fast loader fills about 2 MB in that time.
			wait = min(wait*2, 10*time.Millisecond)
		}
	}
}

// loadInfo asks the loading server of node n its memory and persistence sections, making
// the client *c once the server's socket accepts connections: a go-redis client whose
// dials failed keeps answering with that failure for a second before it dials again.
// A client that failed is dropped, so that the next question dials anew.
func loadInfo(ctx context.Context, d *Driver, n node, c **redis.Client, secret string) (string, error) {
	if *c == nil {
		conn, err := d.dialServer(ctx, n, 0)
		if err != nil {
			return "", err
		}
		conn.Close()
		*c = d.newClient(n, 0, cred{internalUser, secret})
	}
	info, err := (*c).Info(ctx, "memory", "persistence").Result()
	if err != nil {
		(*c).Close()
		*c = nil
	}
	return info, err
}

// bgsave makes the server write its RDB file and waits until it has.
func (d *Driver) bgsave(ctx context.Context, c *redis.Client) error {
	if err := c.BgSave(ctx).Err(); err != nil {
		return fmt.Errorf("BGSAVE: %w", classify(err))
	}
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("waiting for the background save: %w", classify(err))
		}
		if infoField(info, "rdb_bgsave_in_progress") == "0" {
			if s := infoField(info, "rdb_last_bgsave_status"); s != "ok" {
				return fmt.Errorf("background save failed: rdb_last_bgsave_status:%s", s)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// joinParts writes the parts of a backup to dst as one RDB file. A cluster's backup has a
// part per shard, and each part carries the same functions, which one file may hold once
// (redis refuses a library loaded twice): SplitRDB, into one output, keeps each library
// once. Parts it cannot read so (keys outside database 0, data it does not know) are
// joined as they are (MergeRDB), as a backup of a non-cluster database's parts are.
func joinParts(dst *os.File, files []string) error {
	parts, closeParts, err := openParts(files)
	if err != nil {
		return err
	}
	defer closeParts()
	err = redisdata.SplitRDB([]io.Writer{dst}, func(int) int { return 0 }, parts)
	if !errors.Is(err, redisdata.ErrNotSplittable) && !errors.Is(err, redisdata.ErrOtherDatabase) {
		return err
	}
	if _, err = dst.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err = dst.Truncate(0); err != nil {
		return err
	}
	return redisdata.MergeRDB(dst, files)
}

// openParts opens the files of an import for reading; closeParts closes them.
func openParts(files []string) (parts []io.Reader, closeParts func(), err error) {
	var opened []*os.File
	closeParts = func() {
		for _, f := range opened {
			f.Close()
		}
	}
	for _, name := range files {
		f, openErr := os.Open(name)
		if openErr != nil {
			closeParts()
			return nil, nil, openErr
		}
		opened = append(opened, f)
		parts = append(parts, f)
	}
	return parts, closeParts, nil
}
