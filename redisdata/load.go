package redisdata

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb"
)

// LoadConfig says how LoadRDB starts its throwaway servers.
type LoadConfig struct {
	// Binary is the redis-server to run; empty means "redis-server" on PATH.
	Binary string
	// TempDir is where the server's own temporary directory is made; empty means
	// os.TempDir().
	TempDir string
	// Databases is the number of logical databases the server has; an RDB that uses a
	// higher index fails to load. Zero means 256, well above Redis's default of 16, so
	// files from servers configured with more still load.
	Databases int
	// StartTimeout bounds the wait for the server to start and finish loading the file
	// (ctx may end it sooner). Zero means 5 minutes: loading runs at disk and CPU speed,
	// roughly a few hundred MB per second.
	StartTimeout time.Duration
	// NoSanitize turns off the deep integrity check of every value while loading
	// (sanitize-dump-payload). The check is on by default because the files come from
	// users, and a malformed compact encoding that passes the checksum can otherwise
	// crash the server later, in the middle of a copy; it costs some loading speed.
	NoSanitize bool
	// MaxMemory, when set, is the memory limit of the database the file is for: the
	// server's address space is capped accordingly (see CapAddressSpace), so that a file
	// whose values unpack to far more than it is fails to load rather than take the
	// machine's memory.
	MaxMemory int64
}

func (c LoadConfig) binary() string {
	if c.Binary == "" {
		return "redis-server"
	}
	return c.Binary
}

// TempServer is a throwaway redis-server holding the data of one RDB file, reachable on a
// loopback port with a random password. Close kills it and removes its files.
type TempServer struct {
	addr     string
	password string
	dir      string
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process is reaped
	client   *redis.Client
	once     sync.Once
}

// Addr returns the server's loopback host:port.
func (s *TempServer) Addr() string { return s.addr }

// Endpoint returns how to connect to the server (with its password), for CopyKeys.
func (s *TempServer) Endpoint() Endpoint { return Endpoint{Addr: s.addr, Password: s.password} }

// UsedMemory returns the server's used_memory (INFO memory) in bytes: what the data
// takes once loaded (plus an empty server's own megabyte or so), for callers to compare
// with a database's memory limit before they copy it there.
func (s *TempServer) UsedMemory(ctx context.Context) (int64, error) {
	info, err := s.client.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("INFO memory: no used_memory: %w", err)
	}
	return n, nil
}

// Keys returns the number of keys in all logical databases (INFO keyspace).
func (s *TempServer) Keys(ctx context.Context) (int64, error) {
	info, err := s.client.Info(ctx, "keyspace").Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, k := range keyspace(info) {
		n += k
	}
	return n, nil
}

// Close kills the server and removes its temporary directory. It waits (briefly) for the
// process to be gone, so that the memory it held is free when Close returns. Calling it
// again does nothing.
func (s *TempServer) Close() error {
	var err error
	s.once.Do(func() {
		s.client.Close()
		_ = s.cmd.Process.Kill() // fails only if it has exited already; s.done tells either way
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			err = fmt.Errorf("redis-server pid %d did not exit after SIGKILL", s.cmd.Process.Pid)
		}
		if rerr := os.RemoveAll(s.dir); err == nil {
			err = rerr
		}
	})
	return err
}

// LoadRDB starts a throwaway redis-server on the RDB file at path and returns it once the
// file is loaded, so that callers can check a backup or import before it touches a
// database (size, key count, integrity) and then copy it with CopyKeys.
//
// The server runs in its own temporary directory (0700) where the file is symlinked as
// its dbfilename, so nothing is copied and the original is never written; persistence is
// off; it listens on a free loopback port with a random password (given in a 0600 config
// file, not on the command line); on Linux it dies with this process. A file that the
// server refuses (truncated, bad checksum, not an RDB file, unsupported version) gives an
// error wrapping ErrCorrupt with the server's reason.
func LoadRDB(ctx context.Context, cfg LoadConfig, path string) (*TempServer, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("RDB file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("RDB file %s is not a regular file", path)
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A port found free may be taken before the server binds it; try again on another.
	for attempt := 0; ; attempt++ {
		s, err := startTemp(ctx, cfg, abs)
		if errors.Is(err, errPortTaken) && attempt < 5 {
			continue
		}
		return s, err
	}
}

var errPortTaken = errors.New("port taken")

func startTemp(ctx context.Context, cfg LoadConfig, rdb string) (*TempServer, error) {
	s, logPath, err := spawnTemp(cfg, func(dump string) error { return os.Symlink(rdb, dump) })
	if err != nil {
		return nil, err
	}
	if err := s.waitLoaded(ctx, logPath); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// spawnTemp starts a throwaway server in a directory of its own, whose dump.rdb
// (the path given to source) source makes, and returns it with its log's path.
func spawnTemp(cfg LoadConfig, source func(dump string) error) (*TempServer, string, error) {
	dir, err := os.MkdirTemp(cfg.TempDir, "redisdata-")
	if err != nil {
		return nil, "", err
	}
	fail := func(err error) (*TempServer, string, error) {
		os.RemoveAll(dir)
		return nil, "", err
	}
	if err = source(filepath.Join(dir, "dump.rdb")); err != nil {
		return fail(err)
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	pw := make([]byte, 24)
	if _, err = rand.Read(pw); err != nil {
		return fail(err)
	}
	password := hex.EncodeToString(pw)
	dbs := cfg.Databases
	if dbs <= 0 {
		dbs = 256
	}
	sanitize := "yes"
	if cfg.NoSanitize {
		sanitize = "no"
	}
	conf := strings.Join([]string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"protected-mode yes",
		"requirepass " + password,
		"daemonize no",
		`logfile ""`,
		"dir " + strconv.Quote(dir),
		"dbfilename dump.rdb",
		`save ""`,
		"appendonly no",
		"databases " + strconv.Itoa(dbs),
		"sanitize-dump-payload " + sanitize,
		// Its keys only travel to the next server over loopback (DUMP, RESTORE):
		// compressing each payload there and back costs more than it saves.
		"rdbcompression no",
		// A Loader's server answers its memory question (UsedMemory) between two reads
		// of this many bytes of the file (redis' default is 2 MB, which LZF-packed
		// values can make far more memory).
		"loading-process-events-interval-bytes " + strconv.Itoa(loadEventsEvery),
		"always-show-logo no",
		"",
	}, "\n")
	confPath := filepath.Join(dir, "redis.conf")
	if err = os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return fail(err)
	}
	logPath := filepath.Join(dir, "redis.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(cfg.binary(), confPath)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = dieWithParent()
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fail(fmt.Errorf("start %s: %w", cfg.binary(), err))
	}
	if err = CapAddressSpace(cmd.Process.Pid, cfg.MaxMemory); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(fmt.Errorf("cap the address space of %s: %w", cfg.binary(), err))
	}
	s := &TempServer{
		addr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		password: password,
		dir:      dir,
		cmd:      cmd,
		done:     make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState (exitError)
		close(s.done)
	}()
	s.client = client(s.Endpoint(), 0, 2)
	return s, logPath, nil
}

// Loader is a throwaway server, as LoadRDB starts, that loads the RDB file written to it
// as it is written (it reads it through a named pipe), so that a file is checked while it
// is made or downloaded rather than after.
type Loader struct {
	s       *TempServer
	logPath string
	w       *os.File // the pipe's end the file is written to
}

// StartLoad starts a Loader and returns it once its server reads the pipe.
func StartLoad(ctx context.Context, cfg LoadConfig) (*Loader, error) {
	for attempt := 0; ; attempt++ {
		l, err := startLoad(ctx, cfg)
		if errors.Is(err, errPortTaken) && attempt < 5 {
			continue
		}
		return l, err
	}
}

func startLoad(ctx context.Context, cfg LoadConfig) (*Loader, error) {
	var pipe string
	s, logPath, err := spawnTemp(cfg, func(dump string) error {
		pipe = dump
		return syscall.Mkfifo(dump, 0o600)
	})
	if err != nil {
		return nil, err
	}
	// The server opens the pipe once it has started; until then a writer's open fails
	// (ENXIO), and one that exits first says why.
	for {
		w, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			GrowPipe(w)
			// Its name goes at once: a server that fails to load its file opens it again
			// to check it (redis-check-rdb), and would wait there for a writer for ever.
			if rerr := os.Remove(pipe); rerr != nil {
				w.Close()
				s.Close()
				return nil, rerr
			}
			return &Loader{s: s, logPath: logPath, w: w}, nil
		}
		if !errors.Is(err, syscall.ENXIO) {
			s.Close()
			return nil, fmt.Errorf("open the pipe to the loading server: %w", err)
		}
		select {
		case <-s.done:
			err := exitError(logPath, s.cmd.ProcessState)
			s.Close()
			return nil, err
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// Write writes the next bytes of the file. It fails once the server stopped reading: it
// refused the file (Finish says why) or was killed.
func (l *Loader) Write(p []byte) (int, error) { return l.w.Write(p) }

// Finish ends the file and returns the server once it has loaded it; a file it refused
// gives an error wrapping ErrCorrupt with the server's reason, as LoadRDB's.
func (l *Loader) Finish(ctx context.Context) (*TempServer, error) {
	l.w.Close()
	if err := l.s.waitLoaded(ctx, l.logPath); err != nil {
		l.s.Close()
		return nil, err
	}
	return l.s, nil
}

// loadEventsEvery: see spawnTemp.
const loadEventsEvery = 128 << 10

// UsedMemory is the server's used_memory so far: it answers while it loads (see
// spawnTemp), between two reads of its file.
func (l *Loader) UsedMemory(ctx context.Context) (int64, error) { return l.s.UsedMemory(ctx) }

// Kill stops the server at once (SIGKILL): writes fail (EPIPE), and Finish returns an
// error. A caller that stops a server whose memory passed its limit says so itself.
func (l *Loader) Kill() { _ = l.s.cmd.Process.Kill() }

// Abort stops the server, whatever it read.
func (l *Loader) Abort() {
	l.w.Close()
	l.s.Close()
}

// waitLoaded polls PING until the server answers PONG: it answers -LOADING while it reads
// the file, and exits if it cannot, in which case its log says why.
func (s *TempServer) waitLoaded(ctx context.Context, logPath string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-s.done:
			return exitError(logPath, s.cmd.ProcessState)
		default:
		}
		err := rawPing(ctx, s.Endpoint())
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-s.done:
			return exitError(logPath, s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("redis-server had not loaded the RDB file: %w (last answer: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// rawPing is one authenticated PING on a fresh connection, without go-redis, whose pool
// would retry and log while the server is not listening yet.
func rawPing(ctx context.Context, e Endpoint) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	l, err := openLink(ctx, e, 2*time.Second)
	if err != nil {
		return err
	}
	defer l.close()
	_, err = l.call("PING")
	return err
}

// loadFailures are the log lines by which redis-server says it could not load its RDB
// file, most telling first.
var loadFailures = []string{
	"Internal error in RDB",
	"Wrong signature",
	"Wrong RDB checksum",
	"Can't handle RDB format version",
	"configured to handle more than",
	"Short read",
	"Bad file format",
	"Fatal error loading",
	"RDB ERROR DETECTED",
	"rdb file reading failure",
	// Two parts of a merged file (see MergeRDB) that hold the same key.
	"Duplicated key",
}

// LoadFailure returns the reason, wrapping ErrCorrupt, by which a redis-server's log
// says that it could not load its RDB file; nil when the log says no such thing.
func LoadFailure(log string) error {
	lines := strings.Split(log, "\n")
	for _, marker := range loadFailures {
		for _, line := range lines {
			if strings.Contains(line, marker) {
				return fmt.Errorf("%w: redis-server: %s", ErrCorrupt, logMessage(line))
			}
		}
	}
	return nil
}

// ErrOutOfMemory: the server that loaded an RDB file could not allocate what the data
// needs (past the address space of CapAddressSpace: data far larger than its memory
// limit, or a value far larger than its file).
var ErrOutOfMemory = errors.New("redis-server ran out of memory loading the RDB file")

// OutOfMemory returns the line of a loading server's log that says an allocation failed
// ("" if none): redis aborts so when a plain allocation fails, and says so before the
// "Short read" or "Internal error" of an allocation it tries. (One that redis tries for
// the string of an LZF-packed value it reports as "Short read or OOM loading DB" only
// (7.0), which a file cut short gives too: a corrupt file then.)
func OutOfMemory(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "failed allocating") || strings.Contains(line, "Out Of Memory allocating") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// exitError explains why the server exited before it was ready: an allocation that
// failed wraps ErrOutOfMemory, a file refused ErrCorrupt (see LoadFailure).
func exitError(logPath string, st *os.ProcessState) error {
	b, _ := os.ReadFile(logPath)
	log := string(b)
	if strings.Contains(log, "Address already in use") {
		return errPortTaken
	}
	if oom := OutOfMemory(log); oom != "" {
		return fmt.Errorf("%w: %s", ErrOutOfMemory, logMessage(oom))
	}
	if err := LoadFailure(log); err != nil {
		return err
	}
	lines := strings.Split(log, "\n")
	var tail []string
	for i := len(lines) - 1; i >= 0 && len(tail) < 3; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			tail = append([]string{logMessage(l)}, tail...)
		}
	}
	return fmt.Errorf("redis-server exited (%v) before it was ready: %s", st, strings.Join(tail, " / "))
}

// logMessage strips the "pid:role date time level" prefix of a redis log line.
func logMessage(line string) string {
	line = strings.TrimSpace(line)
	for _, sep := range []string{" # ", " * ", " - ", " . "} {
		if i := strings.Index(line, sep); i >= 0 && i < 40 {
			return line[i+len(sep):]
		}
	}
	if i := strings.Index(line, "-> "); i >= 0 {
		return line[i+3:]
	}
	return line
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// LoadChecked loads each file into a throwaway server (see LoadRDB), as the files of one
// import into a database limited to limit bytes (0: no limit), and returns the servers,
// which the caller closes, once all loaded and together they need no more than limit.
// Errors are the import's verdicts: clouddb.ErrDataCorrupt for a file redis refuses,
// clouddb.ErrDataTooLarge for data past the limit (measured, or met as the server's
// capped address space ran out); on error no server is left.
func LoadChecked(ctx context.Context, cfg LoadConfig, files []string, limit int64) ([]*TempServer, error) {
	var temps []*TempServer
	fail := func(err error) ([]*TempServer, error) {
		for _, t := range temps {
			t.Close()
		}
		return nil, err
	}
	var total int64
	for _, f := range files {
		t, err := LoadRDB(ctx, cfg, f)
		switch {
		case errors.Is(err, ErrOutOfMemory):
			return fail(fmt.Errorf("%w: the data needs more memory than the limit of %d bytes allows (%v)", clouddb.ErrDataTooLarge, limit, err))
		case errors.Is(err, ErrCorrupt):
			return fail(fmt.Errorf("%w: %v", clouddb.ErrDataCorrupt, err))
		case err != nil:
			return fail(err)
		}
		temps = append(temps, t)
		used, err := t.UsedMemory(ctx)
		if err != nil {
			return fail(err)
		}
		total += used
	}
	// The throwaway servers hold the data as the database will: their memory use,
	// measured by Redis itself, is what the database would need (give or take an empty
	// server's ~1 MB per part).
	if limit > 0 && total > limit {
		return fail(fmt.Errorf("%w: the data needs about %d bytes, the limit is %d", clouddb.ErrDataTooLarge, total, limit))
	}
	return temps, nil
}
