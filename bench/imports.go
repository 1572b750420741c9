package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb/cloudapi/client"
)

// importResult compares `POST …/import` of one RDB file (served over HTTP by the
// harness) into a database with a bare redis-server loading the same file at start.
type importResult struct {
	// The file: its size, its keys, and the used_memory of its data once loaded.
	FileBytes, Keys, UsedMemory int64
	// MemoryLimitGB is the size of the database imported into.
	MemoryLimitGB float64
	// Per repetition, in order: clouddb server-side (task received → completed) and
	// client-observed (POST sent → task read completed); bare redis-server exec → PONG
	// with loading:0, with the default sanitize-dump-payload no and with yes.
	Server, Wall, Bare, BareSanitize []time.Duration
	// Cluster is the server-side time of the same import into an OSS Cluster database
	// of ClusterShards shards, which splits it by slot and reloads each shard, per repetition.
	Cluster       []time.Duration
	ClusterShards int
	// Phases of each import, as seen from outside clouddb.
	Phases []importPhases
}

// importPhases splits one import by what the harness observes: its HTTP server, the
// database's keys and the processes' CPU time.
type importPhases struct {
	// Queue runs from the task's received timestamp until the harness's HTTP server
	// gets the GET; Download until it has served the last byte; Load until the
	// database's endpoint answers with every key of the file (and without the sentinel
	// key set before the import); Finish until the task's completed timestamp.
	Queue, Download, Load, Finish time.Duration
	// CPU time used during the import by clouddb and by the redis-server that loaded
	// the file (clouddb starts it beside the database's server; sampled every 10 ms
	// until the import ended).
	CPUClouddb, CPULoader time.Duration
}

// mbps is the file's size in MB (10^6 bytes) per second of d.
func (r *importResult) mbps(d time.Duration) float64 {
	return float64(r.FileBytes) / 1e6 / d.Seconds()
}

// ratio is the median of the per-repetition ratios a[i]/b[i].
func ratio(a, b []time.Duration) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		rs = append(rs, float64(a[i])/float64(b[i]))
	}
	return median(rs)
}

// ServerRatio is the import's server-side time over the bare load's, the median of the
// per-repetition ratios.
func (r *importResult) ServerRatio() float64 { return ratio(r.Server, r.Bare) }

// WallRatio is the same for the client-observed time.
func (r *importResult) WallRatio() float64 { return ratio(r.Wall, r.Bare) }

// SanitizeRatio is the bare load with sanitize-dump-payload yes over the one without.
func (r *importResult) SanitizeRatio() float64 { return ratio(r.BareSanitize, r.Bare) }

// medianPhase is the median of one field of the phases.
func (r *importResult) medianPhase(get func(importPhases) time.Duration) time.Duration {
	ds := make([]time.Duration, len(r.Phases))
	for i, p := range r.Phases {
		ds[i] = get(p)
	}
	return medianDur(ds)
}

// importSentinel is the key set in the database before each import; it disappears when
// the import empties the database.
const importSentinel = "bench:import:sentinel"

// importThroughput makes the RDB file, then alternates imports of it into one database
// with bare redis-server loads of it, rotating which goes first.
func (h *harness) importThroughput(ctx context.Context) (*importResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	res := &importResult{}
	t0 := time.Now()
	rdb, err := h.makeDataset(ctx, res)
	if err != nil {
		return nil, fmt.Errorf("make the RDB file: %w", err)
	}
	h.cfg.logf("import: %.1f MB RDB file, %d keys, used_memory %s, made in %s",
		float64(res.FileBytes)/1e6, res.Keys, mib(res.UsedMemory), time.Since(t0).Round(time.Millisecond))

	files, err := serveFile(rdb)
	if err != nil {
		return nil, err
	}
	defer files.close()

	in, err := h.startInstance(ctx, "import", h.importPortLow(), 10)
	if err != nil {
		return nil, err
	}
	defer func() { _ = in.shutdown() }() // for the error paths; a no-op once stopped below
	// Room for the data twice over, in 0.1 GB steps: the memory limit also bounds the
	// file clouddb accepts to download (twice the limit).
	res.MemoryLimitGB = math.Max(0.1, math.Ceil(float64(2*res.UsedMemory)/(1<<30)*10)/10)
	subID, err := createSubscription(ctx, in.c, "import", "import", 1, res.MemoryLimitGB)
	if err != nil {
		return nil, err
	}
	if _, err = in.c.WaitForSubscriptionStatus(ctx, subID, client.SubscriptionActive); err != nil {
		return nil, err
	}
	page, err := in.c.ListDatabases(ctx, subID, 10, 0)
	if err != nil {
		return nil, err
	}
	if len(page.Subscription) != 1 || len(page.Subscription[0].Databases) != 1 {
		return nil, errors.New("the import subscription does not list exactly one database")
	}
	db, err := in.c.WaitForDatabaseStatus(ctx, subID, page.Subscription[0].Databases[0].ID, client.DatabaseActive)
	if err != nil {
		return nil, err
	}
	if db.Security == nil || db.Security.Password == "" {
		return nil, fmt.Errorf("database %d shows no password", db.ID)
	}
	t := importTarget{in: in, subID: subID, dbID: db.ID,
		ep: endpoint{addr: db.PublicEndpoint, password: db.Security.Password}, url: files.url + "/dump.rdb", files: files}

	ct, err := h.clusterTarget(ctx, in, subID, res.MemoryLimitGB, t.url)
	if err != nil {
		return nil, fmt.Errorf("the cluster database: %w", err)
	}
	res.ClusterShards = ct.shards

	for rep := range h.cfg.Reps {
		runs := []func() error{
			func() error {
				d, err := ct.importOnce(ctx, res.Keys)
				if err != nil {
					return fmt.Errorf("import into the cluster: %w", err)
				}
				res.Cluster = append(res.Cluster, d)
				return nil
			},
			func() error {
				server, wall, ph, err := h.importOnce(ctx, t, res.Keys)
				if err != nil {
					return fmt.Errorf("import: %w", err)
				}
				res.Server, res.Wall, res.Phases = append(res.Server, server), append(res.Wall, wall), append(res.Phases, ph)
				return nil
			},
			func() error {
				d, err := h.bareLoad(ctx, rdb, rep, false, res.Keys)
				if err != nil {
					return fmt.Errorf("bare redis-server: %w", err)
				}
				res.Bare = append(res.Bare, d)
				return nil
			},
			func() error {
				d, err := h.bareLoad(ctx, rdb, rep, true, res.Keys)
				if err != nil {
					return fmt.Errorf("bare redis-server, sanitize-dump-payload yes: %w", err)
				}
				res.BareSanitize = append(res.BareSanitize, d)
				return nil
			},
		}
		for i := range runs {
			if err := runs[(rep+i)%len(runs)](); err != nil {
				return nil, err
			}
		}
		h.cfg.logf("import rep %d: clouddb %s (client %s), into the cluster %s, bare load %s, bare load with sanitize %s",
			rep+1, res.Server[rep], res.Wall[rep].Round(time.Millisecond), res.Cluster[rep], res.Bare[rep].Round(time.Millisecond), res.BareSanitize[rep].Round(time.Millisecond))
	}
	h.cfg.logf("import: clouddb %.1f MB/s server-side, bare redis-server %.1f MB/s; ratio %.1f",
		res.mbps(medianDur(res.Server)), res.mbps(medianDur(res.Bare)), res.ServerRatio())
	if err := in.shutdown(); err != nil {
		return res, fmt.Errorf("stop clouddb: %w", err)
	}
	return res, nil
}

// importPortLow is the first port of the import benchmark's clouddb: past the read-path
// and scale ranges.
func (h *harness) importPortLow() int {
	return h.cfg.PortBase + h.cfg.Creates + h.cfg.maxScale() + 160
}

// importTarget is the database imported into, and where the file is served.
type importTarget struct {
	in          *instance
	subID, dbID int
	ep          endpoint
	url         string
	files       *fileServer
}

// importOnce imports the file into the database once and waits for the task's end. It
// returns the server-side time (received → completed timestamps), the client-observed
// one, and the phases.
func (h *harness) importOnce(ctx context.Context, t importTarget, keys int64) (server, wall time.Duration, ph importPhases, err error) {
	c, err := dialRedis(t.ep.addr, t.ep.password, 5*time.Second)
	if err != nil {
		return 0, 0, ph, err
	}
	defer c.close()
	if _, err = c.do(5*time.Second, "SET", importSentinel, "1"); err != nil {
		return 0, 0, ph, fmt.Errorf("SET the sentinel key: %w", err)
	}
	// The server that serves the database now; the import's loader is any other.
	serving, err := serverPid(c)
	if err != nil {
		return 0, 0, ph, err
	}
	t.files.reset()
	w, err := watchImport(ctx, t, keys, serving)
	if err != nil {
		return 0, 0, ph, err
	}
	cpuDB0, err := cpuTime(t.in.pid())
	if err != nil {
		w.stop()
		return 0, 0, ph, err
	}
	t0 := time.Now()
	task, err := t.in.c.ImportDatabase(ctx, t.subID, t.dbID, client.Import{SourceType: client.Ptr("http"), ImportFromURI: []string{t.url}})
	if err != nil {
		w.stop()
		return 0, 0, ph, err
	}
	done, err := t.in.c.WaitForTask(ctx, task.ID)
	wall = time.Since(t0)
	seen := w.stop()
	if err != nil {
		return 0, 0, ph, err
	}
	cpuDB1, err := cpuTime(t.in.pid())
	if err != nil {
		return 0, 0, ph, err
	}
	after, err := dialRedis(t.ep.addr, t.ep.password, 5*time.Second)
	if err != nil {
		return 0, 0, ph, err
	}
	defer after.close()
	n, err := after.doInt(5*time.Second, "DBSIZE")
	if err != nil {
		return 0, 0, ph, err
	}
	if n != keys {
		return 0, 0, ph, fmt.Errorf("the database holds %d keys after the import, want %d", n, keys)
	}
	server = done.Timestamp.Sub(task.Timestamp)
	if server <= 0 {
		server = time.Millisecond // both at millisecond precision
	}
	get, ok := t.files.only()
	switch {
	case !ok:
		return 0, 0, ph, fmt.Errorf("the file was not fetched exactly once (%d requests)", len(t.files.requests()))
	case seen.loaded.IsZero():
		return 0, 0, ph, errors.New("the watcher did not see the database answer with the imported data")
	}
	// Each boundary is clamped to its predecessor: the task's timestamps have
	// millisecond precision and the watcher polls.
	bounds := []time.Time{task.Timestamp, get.start, get.end, seen.loaded, done.Timestamp}
	for i := 1; i < len(bounds); i++ {
		if bounds[i].Before(bounds[i-1]) {
			bounds[i] = bounds[i-1]
		}
	}
	ph = importPhases{
		Queue: bounds[1].Sub(bounds[0]), Download: bounds[2].Sub(bounds[1]), Load: bounds[3].Sub(bounds[2]),
		Finish:     bounds[4].Sub(bounds[3]),
		CPUClouddb: cpuDB1 - cpuDB0, CPULoader: seen.loaderCPU,
	}
	return server, wall, ph, nil
}

// clusterImport is an OSS Cluster database to import the file into.
type clusterImport struct {
	c           *client.Client
	subID, dbID int
	shards      int
	addr, pass  string
	url         string
}

// clusterTarget creates a database of two shards with the OSS Cluster API in the
// import's subscription and waits until it is active.
func (h *harness) clusterTarget(ctx context.Context, in *instance, subID int, sizeGB float64, url string) (*clusterImport, error) {
	const shards = 2
	pw := "cluster-" + strconv.Itoa(os.Getpid())
	task, err := in.c.CreateDatabase(ctx, subID, client.CreateDatabase{
		Name: client.Ptr("import-cluster"), MemoryLimitInGB: client.Ptr(sizeGB), Password: client.Ptr(pw),
		SupportOSSClusterAPI:  client.Ptr(true),
		ThroughputMeasurement: &client.Throughput{By: "number-of-shards", Value: shards},
	})
	if err != nil {
		return nil, err
	}
	done, err := in.c.WaitForTask(ctx, task.ID)
	if err != nil {
		return nil, err
	}
	db, err := in.c.WaitForDatabaseStatus(ctx, subID, done.ResourceID(), client.DatabaseActive)
	if err != nil {
		return nil, err
	}
	return &clusterImport{c: in.c, subID: subID, dbID: db.ID, shards: shards, addr: db.PublicEndpoint, pass: pw, url: url}, nil
}

// importOnce imports the file into the cluster, checks that its shards hold every key
// between them, and returns the server-side time (received → completed timestamps).
func (ci *clusterImport) importOnce(ctx context.Context, keys int64) (time.Duration, error) {
	task, err := ci.c.ImportDatabase(ctx, ci.subID, ci.dbID, client.Import{SourceType: client.Ptr("http"), ImportFromURI: []string{ci.url}})
	if err != nil {
		return 0, err
	}
	done, err := ci.c.WaitForTask(ctx, task.ID)
	if err != nil {
		return 0, err
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{ci.addr}, Password: ci.pass, Protocol: 2, DisableIdentity: true})
	defer cc.Close()
	var mu sync.Mutex
	var total int64
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, derr := c.DBSize(ctx).Result()
		mu.Lock()
		total += n
		mu.Unlock()
		return derr
	})
	if err != nil {
		return 0, err
	}
	if total != keys {
		return 0, fmt.Errorf("the cluster's shards hold %d keys after the import, want %d", total, keys)
	}
	return max(done.Timestamp.Sub(task.Timestamp), time.Millisecond), nil
}

// importWatch observes one import from outside clouddb.
type importWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	seen   importSeen
}

// importSeen is what an importWatch saw: when the database answered with every key of
// the file and without the sentinel, and the CPU time the redis-server that loaded the
// file had used at its last sample.
type importSeen struct {
	loaded    time.Time
	loaderCPU time.Duration
}

// watchImport polls the database's endpoint every 2ms (is the sentinel key gone, how
// many keys does it hold), connecting again when the server it reached goes (the
// loader takes over the endpoint), and looks for the redis-server other than serving
// that clouddb starts under the database's directory to load the file, sampling its CPU time
// every 10ms.
func watchImport(ctx context.Context, t importTarget, keys int64, serving int) (*importWatch, error) {
	c, err := dialRedis(t.ep.addr, t.ep.password, 5*time.Second)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &importWatch{cancel: cancel}
	w.wg.Go(func() {
		defer func() {
			if c != nil {
				c.close()
			}
		}()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if c == nil {
				if c, err = dialRedis(t.ep.addr, t.ep.password, 100*time.Millisecond); err != nil {
					c = nil
					continue
				}
			}
			_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
			c.send("EXISTS", importSentinel)
			c.send("DBSIZE")
			exists, err1 := any(nil), c.wr.Flush()
			var size any
			var err2 error
			if err1 == nil {
				exists, err1 = c.read()
				size, err2 = c.read()
			}
			if err1 != nil || err2 != nil {
				c.close()
				c = nil
				continue
			}
			if exists == int64(0) && size == keys {
				w.mu.Lock()
				w.seen.loaded = time.Now()
				w.mu.Unlock()
				return
			}
		}
	})
	w.wg.Go(func() {
		loader := 0
		for {
			wait := 5 * time.Millisecond
			if loader == 0 {
				// Under the database's own directory: the cluster database's servers
				// run under the same data directory.
				loader = findRedisUnder(filepath.Join(t.in.dataDir, "databases", strconv.Itoa(t.dbID)), serving)
			}
			if loader != 0 {
				wait = 10 * time.Millisecond
				if cpu, err := cpuTime(loader); err == nil {
					w.mu.Lock()
					w.seen.loaderCPU = cpu
					w.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	})
	return w, nil
}

// stop ends the watch and returns what it saw.
func (w *importWatch) stop() importSeen {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// findRedisUnder returns the pid of a redis-server process other than except whose
// working directory is under root, or 0. It reads /proc itself: pgrep would fork a
// process every few milliseconds while the import is timed.
func findRedisUnder(root string, except int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	root = filepath.Clean(root) + string(filepath.Separator)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "redis-server" {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && strings.HasPrefix(cwd+string(filepath.Separator), root) {
			return pid
		}
	}
	return 0
}

// fileServer serves one file on loopback with net/http and records every request.
type fileServer struct {
	url  string
	srv  *http.Server
	mu   sync.Mutex
	reqs []served
}

// served is one request: when it arrived and when its last byte was written.
type served struct {
	start, end time.Time
	status     int
}

// serveFile serves path as /dump.rdb on a loopback port.
func serveFile(path string) (*fileServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fs := &fileServer{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /dump.rdb", func(w http.ResponseWriter, r *http.Request) {
		s := served{start: time.Now(), status: http.StatusOK}
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
		if _, err := io.Copy(w, f); err != nil {
			s.status = 0
		}
		s.end = time.Now()
		fs.mu.Lock()
		fs.reqs = append(fs.reqs, s)
		fs.mu.Unlock()
	})
	fs.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// Serve returns http.ErrServerClosed once closed; a server that failed shows as the
	// import's download failing.
	go func() { _ = fs.srv.Serve(ln) }()
	return fs, nil
}

func (fs *fileServer) close() { fs.srv.Close() }

func (fs *fileServer) reset() {
	fs.mu.Lock()
	fs.reqs = nil
	fs.mu.Unlock()
}

func (fs *fileServer) requests() []served {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]served(nil), fs.reqs...)
}

// only returns the one complete request since the last reset.
func (fs *fileServer) only() (served, bool) {
	r := fs.requests()
	if len(r) != 1 || r[0].status != http.StatusOK {
		return served{}, false
	}
	return r[0], true
}

// startRedis execs redis-server with a config of the given extra lines on a free
// loopback port in dir, with a password; it returns once the server answers an
// authenticated PING (or fails after timeout).
func (h *harness) startRedis(ctx context.Context, dir string, extra []string, timeout time.Duration) (*proc, endpoint, error) {
	port, err := freePort()
	if err != nil {
		return nil, endpoint{}, err
	}
	ep := endpoint{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), password: "bench-password"}
	p, err := h.execRedis(dir, port, ep.password, extra)
	if err != nil {
		return nil, endpoint{}, err
	}
	if err := waitPing(ctx, ep.addr, ep.password, 5*time.Millisecond, time.Now().Add(timeout)); err != nil {
		p.kill()
		return nil, endpoint{}, err
	}
	return p, ep, nil
}

// execRedis writes dir/redis.conf (loopback, the password, no persistence, logs to
// stdout, plus extra) and execs redis-server on it in dir.
func (h *harness) execRedis(dir string, port int, password string, extra []string) (*proc, error) {
	conf := []string{
		"port " + strconv.Itoa(port), "bind 127.0.0.1", "protected-mode yes", "requirepass " + password,
		`save ""`, "appendonly no", "dir " + strconv.Quote(dir), `logfile ""`,
	}
	conf = append(conf, extra...)
	confPath := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", confPath)
	cmd.Dir = dir
	return h.reaper.start(cmd)
}

// makeDataset fills a bare redis-server with the dataset until its RDB file (SAVE) is
// at least ImportMB, and returns the file's path, with its size, keys and used_memory
// in res.
func (h *harness) makeDataset(ctx context.Context, res *importResult) (string, error) {
	dir := filepath.Join(h.dir, "import-source")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	p, ep, err := h.startRedis(ctx, dir, []string{"dbfilename dump.rdb"}, 30*time.Second)
	if err != nil {
		return "", err
	}
	defer p.kill()
	c, err := dialRedis(ep.addr, ep.password, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.close()
	target := int64(h.cfg.ImportMB) * 1e6
	path := filepath.Join(dir, "dump.rdb")
	g := newDatasetGen(1)
	// A first round assumes 1,000 bytes of file per record (more than there are);
	// later rounds extrapolate from the file so far.
	want := max(500, int(target/1000))
	for round := 0; ; round++ {
		if err = g.fill(ctx, c, want); err != nil {
			return "", err
		}
		if _, err = c.do(5*time.Minute, "SAVE"); err != nil {
			return "", fmt.Errorf("SAVE: %w", err)
		}
		fi, statErr := os.Stat(path)
		if statErr != nil {
			return "", statErr
		}
		res.FileBytes = fi.Size()
		if res.FileBytes >= target*98/100 || round == 8 {
			break
		}
		perRecord := float64(res.FileBytes) / float64(g.next)
		want = max(100, int(float64(target-res.FileBytes)/perRecord))
	}
	if res.Keys, err = c.doInt(10*time.Second, "DBSIZE"); err != nil {
		return "", err
	}
	if res.Keys != int64(g.keys) {
		return "", fmt.Errorf("the source holds %d keys, %d were written", res.Keys, g.keys)
	}
	v, err := c.do(10*time.Second, "INFO", "memory")
	if err != nil {
		return "", err
	}
	info, _ := v.(string)
	if res.UsedMemory, err = strconv.ParseInt(infoField(info, "used_memory"), 10, 64); err != nil {
		return "", fmt.Errorf("INFO memory: used_memory: %w", err)
	}
	c.close()
	p.kill()
	out := filepath.Join(h.dir, "import.rdb")
	return out, os.Rename(path, out)
}

// bareLoadPoll is how often the bare load polls PING.
const bareLoadPoll = time.Millisecond

// bareLoad copies the file into a new directory as dump.rdb, execs redis-server on it
// (with sanitize-dump-payload yes or no), and returns the time from exec until an
// authenticated PING answers PONG and INFO says loading:0. It checks the key count and
// kills the server before it returns.
func (h *harness) bareLoad(ctx context.Context, rdb string, i int, sanitize bool, keys int64) (time.Duration, error) {
	dir := filepath.Join(h.dir, "bare-load", strconv.Itoa(i)+"-"+strconv.FormatBool(sanitize))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := copyFile(rdb, filepath.Join(dir, "dump.rdb")); err != nil {
		return 0, err
	}
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	const password = "bare-password"
	sanitizeConf := "sanitize-dump-payload no"
	if sanitize {
		sanitizeConf = "sanitize-dump-payload yes"
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	t0 := time.Now()
	p, err := h.execRedis(dir, port, password, []string{"dbfilename dump.rdb", sanitizeConf})
	if err != nil {
		return 0, err
	}
	defer p.kill()
	for {
		if authPing(addr, password, 10*time.Second) == nil {
			if loaded, infoErr := bareLoaded(addr, password); infoErr != nil {
				return 0, infoErr
			} else if loaded {
				break
			}
		}
		if p.exited() {
			return 0, fmt.Errorf("redis-server exited: %v", p.err)
		}
		if time.Since(t0) > 5*time.Minute {
			return 0, errors.New("not loaded within 5 minutes")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(bareLoadPoll):
		}
	}
	d := time.Since(t0)
	c, err := dialRedis(addr, password, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.close()
	n, err := c.doInt(5*time.Second, "DBSIZE")
	if err != nil {
		return 0, err
	}
	if n != keys {
		return 0, fmt.Errorf("loaded %d keys, want %d", n, keys)
	}
	return d, nil
}

// bareLoaded reports whether INFO persistence says loading:0.
func bareLoaded(addr, password string) (bool, error) {
	c, err := dialRedis(addr, password, 5*time.Second)
	if err != nil {
		return false, err
	}
	defer c.close()
	v, err := c.do(5*time.Second, "INFO", "persistence")
	if err != nil {
		return false, err
	}
	info, _ := v.(string)
	return infoField(info, "loading") == "0", nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// goalImport is the least import throughput, as a share of a bare redis-server loading
// the same file (the import may take at most 1/goalImport times as long).
const goalImport = 0.8
