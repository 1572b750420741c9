package redisdata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb"
)

// The states of a source in SourceStatus and Event.
const (
	// StateSyncing: connecting, receiving the RDB, or copying it into the target.
	StateSyncing = "syncing"
	// StateStreaming: the target has the source's data and receives its changes.
	StateStreaming = "streaming"
	// StateError: the last attempt failed; a retry is scheduled.
	StateError = "error"
)

// ReplicatorOptions tunes a Replicator. The zero value is usable.
type ReplicatorOptions struct {
	// Load says how to start the throwaway servers that full syncs load RDBs into; its
	// TempDir also receives the RDB files while they are in use.
	Load LoadConfig
	// OnEvent, when set, is called on every change of state and every error, from the
	// replicator's goroutines: it must return quickly. Callers log these.
	OnEvent func(Event)
	// MinBackoff and MaxBackoff bound the wait before reconnecting to a failed source; it
	// doubles from MinBackoff after each failed attempt. Zero means 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// AckInterval is how often REPLCONF ACK reports the applied offset to a source, which
	// is what keeps the master from timing the link out. Zero means one second, as a
	// Redis replica does.
	AckInterval time.Duration
	// Timeout is how long a silent link is trusted. Masters PING their replicas every
	// repl-ping-replica-period (10s by default). Zero means 60s, Redis's repl-timeout.
	Timeout time.Duration
	// MaxBuffer bounds the bytes of commands received but not yet applied (during a full
	// sync they wait for the RDB to be copied). Zero means 64 MiB.
	MaxBuffer int64
	// BatchSize is the CopyKeys batch size for full syncs.
	BatchSize int
	// Logger receives the panics the replicator recovers from; default slog.Default().
	Logger *slog.Logger
}

func (o *ReplicatorOptions) defaults() {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.AckInterval <= 0 {
		o.AckInterval = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.MaxBuffer <= 0 {
		o.MaxBuffer = 64 << 20
	}
}

// SourceStatus is the state of one source of a Replicator.
type SourceStatus struct {
	// Endpoint is the source's host:port (never its credentials).
	Endpoint string
	// State is StateSyncing, StateStreaming or StateError.
	State string
	// LastError is the most recent failure: of the link while State is StateError, or of
	// a replicated command the target refused while streaming. A new full or partial
	// sync clears it.
	LastError string
	// LastSync is when the target last caught up with the source: a full sync copied,
	// or a broken link continued. Zero until then.
	LastSync time.Time
	// Offset is the source's replication offset the target has applied up to.
	Offset int64
}

// Event is one thing that happened to one source, for callers to log.
type Event struct {
	Time     time.Time
	Endpoint string // host:port of the source
	State    string // the source's state after the event
	Message  string
	Err      error // set for failures
}

// Replicator keeps a target database a replica of one or several sources, their data
// merged: for each source it connects as a Redis replica does (PSYNC), copies the full
// RDB into the target, then applies the source's replication stream to the target as it
// comes, reconnecting after failures until Stop. After a broken link it asks to continue
// the stream where it broke (PSYNC <replid> <offset+1>), which the source grants while its
// backlog still holds that offset, so a short outage costs no new copy; otherwise, or if
// the target restarted or refused a write in the middle of a batch, it copies again.
//
// The target is written as an ordinary client authenticated with the target Endpoint's
// credentials (RESTORE for the full copy, then the replicated commands themselves), not
// through REPLICAOF: a Redis replica has one master and starts by emptying itself, and a
// merge of several sources cannot. So callers refuse other clients' writes on the target
// themselves (an ACL that lets only this user write), and the user needs the rights to
// RESTORE and to run whatever the sources replicate, and INFO (to notice a restarted
// target). A source's user needs PSYNC and REPLCONF.
//
// Limits: sources write into one keyspace, so the same key written by two sources ends up
// as the last write; a FLUSHALL/FLUSHDB on a source empties the target for all of them;
// a full resync (first sync, or after a link is lost and the source cannot continue its
// stream) overwrites the source's keys but does not remove keys it deleted while the link
// was down; functions and scripts in the RDB are not copied (their effects are).
type Replicator struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	sources []*source
}

// Start begins replicating sources into target and returns at once; progress shows in
// Status and OnEvent. It runs until Stop is called or ctx ends. Changing the list of
// sources is a Stop and a new Start: the target keeps what it has.
func Start(ctx context.Context, target Endpoint, sources []Endpoint, opts ReplicatorOptions) *Replicator {
	opts.defaults()
	ctx, cancel := context.WithCancel(ctx)
	r := &Replicator{cancel: cancel}
	for _, ep := range sources {
		s := &source{ep: ep, target: target, opts: opts}
		s.status = SourceStatus{Endpoint: ep.Addr, State: StateSyncing}
		r.sources = append(r.sources, s)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			s.run(ctx)
		}()
	}
	return r
}

// Stop ends replication of every source and returns once every connection is closed and
// every throwaway server is gone. Commands already applied stay on the target.
func (r *Replicator) Stop() {
	r.cancel()
	r.wg.Wait()
}

// Status returns the state of each source, in the order given to Start.
func (r *Replicator) Status() []SourceStatus {
	out := make([]SourceStatus, len(r.sources))
	for i, s := range r.sources {
		s.mu.Lock()
		out[i] = s.status
		s.mu.Unlock()
		out[i].Offset = s.applied.Load()
	}
	return out
}

// source replicates one source.
type source struct {
	ep     Endpoint
	target Endpoint
	opts   ReplicatorOptions

	mu     sync.Mutex
	status SourceStatus

	applied atomic.Int64 // replication offset applied to the target

	// Where to continue the stream after a broken link (replid empty: full resync). Only
	// the run goroutine touches these.
	replid      string
	db          int
	targetRunID string // the target's run_id when the stream began

	lastCmdEvent time.Time // rate limit of "command refused" events
	suppressed   int
}

func (s *source) emit(state, msg string, err error) {
	now := time.Now()
	s.mu.Lock()
	s.status.State = state
	switch {
	case err != nil:
		s.status.LastError = err.Error()
	case state == StateStreaming:
		s.status.LastError = ""
		s.status.LastSync = now
	}
	s.mu.Unlock()
	if s.opts.OnEvent != nil {
		s.deliver(Event{Time: now, Endpoint: s.ep.Addr, State: state, Message: msg, Err: err})
	}
}

// deliver calls OnEvent; a panic there is the caller's bug and must not stop replication
// (nor the process).
func (s *source) deliver(ev Event) {
	defer s.recoverAndLog("replication event")
	s.opts.OnEvent(ev)
}

// errInternal is what a session that panicked fails with: its cause goes to the log, not
// into events a tenant may read.
var errInternal = errors.New("internal error in the replicator (logged for the operator)")

// recoverAndLog, deferred itself (recover works only there), logs a panic with its stack.
func (s *source) recoverAndLog(what string) {
	if p := clouddb.Recovered(recover()); p != nil {
		s.logPanic(what, p)
	}
}

func (s *source) logPanic(what string, p *clouddb.PanicError) {
	l := s.opts.Logger
	if l == nil {
		l = slog.Default()
	}
	l.Error("replicator panicked", "work", what, "source", s.ep.Addr, "target", s.target.Addr, "panic", p.Value, "stack", string(p.Stack))
}

// testSessionHook, when set by a test, runs at the start of every session.
var testSessionHook func(Endpoint)

// safeSession is session that survives a panic: the session fails with errInternal and
// run tries again after its backoff, as after any failure.
func (s *source) safeSession(ctx context.Context) (streamed bool, err error) {
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			s.logPanic("replication session", p)
			streamed, err = false, errInternal
		}
	}()
	if testSessionHook != nil {
		testSessionHook(s.ep)
	}
	return s.session(ctx)
}

// run keeps a session with the source going until ctx ends, backing off between failed
// attempts (the backoff restarts after a session that reached streaming).
func (s *source) run(ctx context.Context) {
	backoff := s.opts.MinBackoff
	for {
		streamed, err := s.safeSession(ctx)
		if ctx.Err() != nil {
			return
		}
		if streamed {
			backoff = s.opts.MinBackoff
		}
		s.emit(StateError, fmt.Sprintf("replication from %s failed; retrying in %s", s.ep.Addr, backoff), err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, s.opts.MaxBackoff)
	}
}

// errLink marks a failure of the link to the source (as opposed to the target), after
// which the stream may be continued where it broke.
type errLink struct{ err error }

func (e errLink) Error() string {
	if errors.Is(e.err, io.EOF) {
		return "the source closed the replication link"
	}
	return "replication link lost: " + e.err.Error()
}
func (e errLink) Unwrap() error { return e.err }

// session runs one connection to the source: handshake, full sync or continuation, then
// the stream, until something fails. It reports whether it reached streaming.
func (s *source) session(parent context.Context) (streamed bool, err error) {
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred below) and close have stopped the goroutines
	defer cancel()

	// The target first: there is no point pulling an RDB nobody can write.
	tc := client(s.target, 0, 1)
	defer tc.Close()
	conn := tc.Conn()
	defer conn.Close()
	if err = conn.Ping(ctx).Err(); err != nil {
		s.replid = "" // it may come back empty
		return false, fmt.Errorf("target %s: %w", s.target.Addr, classify(err))
	}
	// A target that restarted since the last session may have lost what was applied:
	// continuing the stream would leave it without the RDB's data. Its run_id tells
	// (when the user may run INFO; otherwise a restart goes unnoticed).
	runID := ""
	if info, ierr := conn.Info(ctx, "server").Result(); ierr == nil {
		runID = infoField(info, "run_id")
	}
	if runID != s.targetRunID {
		s.replid = ""
	}

	l, err := openLink(ctx, s.ep, s.opts.Timeout)
	if err != nil {
		return false, err // the continuation stays possible: the master's backlog decides
	}
	defer l.close()
	r, err := l.handshake(false, s.replid, s.applied.Load())
	if err != nil {
		return false, err
	}
	q := newQueue(s.opts.MaxBuffer)
	startStream := func() {
		wg.Add(2)
		go func() { // reader: the link, at network speed
			defer wg.Done()
			defer func() {
				if p := clouddb.Recovered(recover()); p != nil {
					s.logPanic("replication link reader", p)
					q.close(errInternal) // the session ends, and run starts another
				}
			}()
			for {
				c, rerr := l.readCommand()
				if rerr == nil {
					rerr = q.push(ctx, c)
				} else {
					rerr = errLink{rerr}
				}
				if rerr != nil {
					q.close(rerr)
					return
				}
			}
		}()
		go func() { // keep-alive: the master drops replicas that stop acknowledging
			defer wg.Done()
			// Without acknowledgements the master drops the link, which the reader sees.
			defer s.recoverAndLog("replication keep-alive")
			// After a diskless RDB the master starts the stream on the first ACK it gets
			// once it has noticed the end of its RDB child, which it checks every 100ms:
			// an ACK that comes earlier is not taken as the start signal. Acknowledging
			// often at first makes the stream start within that, not a second later.
			fast := time.Now().Add(3 * time.Second)
			interval := min(fastAck, s.opts.AckInterval)
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					if l.send("REPLCONF", "ACK", strconv.FormatInt(s.applied.Load(), 10)) != nil {
						return // the reader sees the broken link
					}
					if interval != s.opts.AckInterval && now.After(fast) {
						interval = s.opts.AckInterval
						t.Reset(interval)
					}
				}
			}
		}()
	}

	if r.full {
		s.replid = ""
		s.db = 0
		s.applied.Store(max(r.offset, 0))
		s.emit(StateSyncing, fmt.Sprintf("full resync from %s at offset %d", s.ep.Addr, r.offset), nil)
		if err = s.fullSync(ctx, l, startStream); err != nil {
			return false, err
		}
		s.replid, s.targetRunID = r.replid, runID
	} else {
		s.replid = r.replid
		startStream()
		if s.db != 0 {
			if err = conn.Do(ctx, "select", s.db).Err(); err != nil {
				s.replid = ""
				return false, fmt.Errorf("target %s: SELECT %d: %w", s.target.Addr, s.db, err)
			}
		}
		s.emit(StateStreaming, fmt.Sprintf("continued the stream of %s at offset %d", s.ep.Addr, s.applied.Load()), nil)
	}

	err = s.apply(ctx, l, conn, q)
	var le errLink
	if !errors.As(err, &le) {
		s.replid = "" // the target may hold part of a batch: only a full resync is safe
	}
	return true, err
}

// fullSync receives the RDB into a file, starts reading the stream (which the master
// buffers from the snapshot's offset on), and copies the RDB's keys into the target
// through a throwaway server, without flushing the target: other sources' keys stay.
func (s *source) fullSync(ctx context.Context, l *link, startStream func()) error {
	f, err := os.CreateTemp(s.opts.Load.TempDir, "redisdata-sync-*.rdb")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	size, err := l.readRDB(&rdbCheckWriter{w: f})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("receiving the RDB: %w", err)
	}
	// A master that sent a diskless RDB starts the stream on the first ACK.
	if err = l.send("REPLCONF", "ACK", strconv.FormatInt(s.applied.Load(), 10)); err != nil {
		return errLink{err}
	}
	startStream()
	start := time.Now()
	ts, err := LoadRDB(ctx, s.opts.Load, f.Name())
	if err != nil {
		return fmt.Errorf("loading the RDB of %s: %w", s.ep.Addr, err)
	}
	defer ts.Close()
	keys, err := CopyKeys(ctx, ts.Endpoint(), s.target, CopyOptions{BatchSize: s.opts.BatchSize})
	if err != nil {
		return fmt.Errorf("copying the RDB of %s into the target: %w", s.ep.Addr, err)
	}
	ts.Close()
	s.emit(StateStreaming, fmt.Sprintf("full sync of %s done: %d keys from an RDB of %d bytes in %s",
		s.ep.Addr, keys, size, time.Since(start).Round(time.Millisecond)), nil)
	return nil
}

// fastAck is the ACK interval of the first seconds of a link.
const fastAck = 50 * time.Millisecond

// targetCheck is how long the applier waits for a command before it checks the target.
const targetCheck = time.Second

// applyBatch is the most commands sent to the target in one pipeline.
const applyBatch = 1000

// apply writes the queued commands to the target in stream order, pipelined, and
// advances the applied offset. PING and REPLCONF belong to the link and are not applied;
// REPLCONF GETACK is answered once everything before it is applied. A command the target
// refuses is reported and skipped, as a Redis replica does; a failure to reach the
// target ends the session.
func (s *source) apply(ctx context.Context, l *link, conn *redis.Conn, q *queue) error {
	pipe := conn.Pipeline()
	var sent []*redis.Cmd
	var sentCmds []command
	var pending int64 // stream bytes covered by the commands sent but not yet executed
	db, inMulti := s.db, false
	flush := func() error {
		if len(sent) > 0 {
			_, _ = pipe.Exec(ctx) // errors are read per command below
			for i, c := range sent {
				err := c.Err()
				if err == nil || errors.Is(err, redis.Nil) {
					continue
				}
				var rerr redis.Error
				if !errors.As(err, &rerr) {
					return fmt.Errorf("target %s: %w", s.target.Addr, err)
				}
				if sentCmds[i].name() == "select" {
					// Going on would write the next commands into the wrong database.
					return fmt.Errorf("target %s refused SELECT %s: %w", s.target.Addr, sentCmds[i].args[1:], err)
				}
				s.refused(sentCmds[i], err)
			}
			sent, sentCmds = sent[:0], sentCmds[:0]
		}
		s.applied.Add(pending)
		pending = 0
		s.db = db
		return nil
	}
	for {
		batch, err := q.pop(ctx, applyBatch, targetCheck)
		if err == nil && len(batch) == 0 {
			// Quiet source: make sure the target is still the server we have been
			// writing to, so that a target that restarted (empty) gets a full copy now
			// rather than at the source's next write.
			if perr := conn.Ping(ctx).Err(); perr != nil {
				return fmt.Errorf("target %s: %w", s.target.Addr, perr)
			}
			continue
		}
		if err != nil {
			if !inMulti {
				return err
			}
			// The transaction's EXEC never came: the target discards it with the
			// connection, so the stream cannot be continued after it (not an errLink).
			return fmt.Errorf("%s, inside MULTI", err)
		}
		for _, c := range batch {
			switch c.name() {
			case "ping":
				pending += c.size
				continue
			case "replconf":
				pending += c.size
				if len(c.args) > 1 && bytes.EqualFold(c.args[1], []byte("getack")) {
					if err := flush(); err != nil {
						return err
					}
					if err := l.send("REPLCONF", "ACK", strconv.FormatInt(s.applied.Load(), 10)); err != nil {
						return errLink{err}
					}
				}
				continue
			case "select":
				if len(c.args) == 2 {
					if n, err := strconv.Atoi(string(c.args[1])); err == nil {
						db = n
					}
				}
			case "multi":
				inMulti = true
			case "exec", "discard":
				inMulti = false
			}
			args := make([]any, len(c.args))
			for i, a := range c.args {
				args[i] = a
			}
			sent = append(sent, pipe.Do(ctx, args...))
			sentCmds = append(sentCmds, c)
			pending += c.size
		}
		if err := flush(); err != nil {
			return err
		}
	}
}

// refused reports a replicated command the target refused (for instance WRONGTYPE when
// two sources use one key name for different types), at most once a second.
func (s *source) refused(c command, err error) {
	now := time.Now()
	if now.Sub(s.lastCmdEvent) < time.Second {
		s.suppressed++
		return
	}
	msg := fmt.Sprintf("the target refused a replicated %s from %s", c.name(), s.ep.Addr)
	if s.suppressed > 0 {
		msg += fmt.Sprintf(" (and %d other commands in the last second)", s.suppressed)
	}
	s.lastCmdEvent, s.suppressed = now, 0
	s.emit(StateStreaming, msg, fmt.Errorf("%s: %w", c.name(), err))
}
