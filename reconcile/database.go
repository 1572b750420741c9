package reconcile

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"clouddb"
)

// index finds databases by account and port, to resolve same-account replica sources.
type index map[[2]int]*clouddb.Database

func newIndex(dbs []*clouddb.Database) index {
	idx := make(index, len(dbs))
	for _, d := range dbs {
		if d.Status != clouddb.DatabaseDeleting {
			idx[[2]int{d.AccountID, d.Port}] = d
		}
	}
	return idx
}

// instance is what the driver must run for d: its settings, its resolved sources and
// its named users. A same-account source that no longer exists is left out (and
// reported).
func (r *Reconciler) instance(ctx context.Context, d *clouddb.Database, idx index, acl *aclState) clouddb.Instance {
	in, missing := desiredInstance(d, idx, acl)
	for _, addr := range missing {
		r.Logger.Warn("replica source names no database any more", "database_id", d.ID, "source", addr)
	}
	return in
}

// desiredInstance is instance without the reports: it also returns the addresses of the
// same-account sources it left out.
func desiredInstance(d *clouddb.Database, idx index, acl *aclState) (clouddb.Instance, []string) {
	in := clouddb.InstanceOf(d)
	var missing []string
	for _, uri := range d.ReplicaOf {
		src, err := clouddb.ParseReplicaSource("replicaOf", uri)
		if err != nil {
			continue // validated when it was set
		}
		ep := clouddb.RedisEndpoint{Addr: src.Addr(), Username: src.Username, Password: src.Password, TLS: src.TLS, SameAccount: src.SameAccount}
		if src.SameAccount {
			s := idx[[2]int{d.AccountID, src.Port}]
			if s == nil {
				missing = append(missing, src.Addr())
				continue
			}
			ep.Password = s.Password
		}
		in.ReplicaOf = append(in.ReplicaOf, ep)
	}
	in.Users = acl.usersOf(d)
	return in, missing
}

// fingerprint identifies an instance, to tell when the driver must be told again.
func fingerprint(in clouddb.Instance) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%#v", in))
	return string(sum[:])
}

func (r *Reconciler) database(ctx context.Context, d *clouddb.Database, idx index, acl *aclState) {
	key := "db:" + strconv.Itoa(d.ID)
	failed := func(ctx context.Context) { r.databaseFailed(ctx, d) }
	switch d.Status {
	case clouddb.DatabasePending, clouddb.DatabaseChangePending:
		r.spawn(ctx, key, func(ctx context.Context) error { return r.provisionDatabase(ctx, d, r.instance(ctx, d, idx, acl)) }, failed)
	case clouddb.DatabaseDeleting:
		// A deletion that panicked is left deleting: the next pass tries again, as the
		// user asked for the database to go, and an error status would keep it.
		r.spawn(ctx, key, func(ctx context.Context) error { return r.removeDatabase(ctx, d) }, nil)
	case clouddb.DatabaseActive:
		r.spawn(ctx, key, func(ctx context.Context) error { return r.superviseDatabase(ctx, d, r.instance(ctx, d, idx, acl)) }, failed)
	case clouddb.DatabaseError:
		// Not supervised: a failed Ensure leaves a server that runs running (it may hold
		// the only copy of the data). Its named users still follow the ACL rows.
		in, _ := desiredInstance(d, idx, acl) // its sources were reported when it failed
		if _, ok := r.Driver.(clouddb.UserSetter); ok && !r.usersApplied(d.ID, in) {
			r.spawn(ctx, key, func(ctx context.Context) error { r.setUsers(ctx, d, in); return nil }, nil)
		}
	}
}

// databaseFailed puts d in error after its provisioning or supervision panicked, so that
// it is not tried again in a loop and its owner sees that something went wrong.
func (r *Reconciler) databaseFailed(ctx context.Context, d *clouddb.Database) {
	r.remember(d.ID, clouddb.Instance{}, errRemoved)
	var set bool
	err := r.update(ctx, func(tx clouddb.Tx) error {
		var serr error
		set, serr = tx.SetDatabaseStatus(ctx, d.ID, d.Generation, clouddb.DatabaseError, clouddb.InternalErrorDetail)
		return serr
	})
	if err != nil {
		r.Logger.Error("mark database failed", "database_id", d.ID, "err", err)
		return
	}
	if set {
		r.event(ctx, d.AccountID, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) failed: %s", d.Spec.Name, d.ID, clouddb.InternalErrorDetail)
		r.Notify() // its subscription may be waiting for it
	}
}

// provisionDatabase makes the server match the database's generation and settles its
// status, unless a newer change arrived meanwhile (the next pass handles that one).
func (r *Reconciler) provisionDatabase(ctx context.Context, d *clouddb.Database, in clouddb.Instance) error {
	// Marked before the delay: the call is under way from now on.
	r.usersInFlight(d.ID, in)
	if !r.delay(ctx) {
		return nil
	}
	err := r.withDriver(ctx, func() error { return r.Driver.Ensure(ctx, in) })
	if ctx.Err() != nil {
		return nil
	}
	r.remember(d.ID, in, err)
	if r.waiting(d.ID, err) {
		// Stays pending; a later pass tries again. A server that runs meanwhile (still
		// loading) gets the users when it can take them.
		r.setUsers(ctx, d, in)
		return nil
	}
	status, detail := clouddb.DatabaseActive, ""
	if err != nil {
		status, detail = clouddb.DatabaseError, err.Error()
	}
	var set bool
	if uerr := r.update(ctx, func(tx clouddb.Tx) error {
		var serr error // not err: that one is the driver's, reported below
		set, serr = tx.SetDatabaseStatus(ctx, d.ID, d.Generation, status, detail)
		return serr
	}); uerr != nil {
		return uerr
	}
	if !set {
		return nil
	}
	if err != nil {
		r.event(ctx, d.AccountID, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) failed to start: %v", d.Spec.Name, d.ID, err)
	} else {
		r.event(ctx, d.AccountID, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) is active on port %d", d.Spec.Name, d.ID, d.Port)
		if d.ActivatedOn.IsZero() && r.Provisioned != nil {
			r.Provisioned(d, r.Now().Sub(d.CreatedAt))
		}
	}
	r.Notify() // its subscription may be waiting for it
	return nil
}

var errRemoved = errors.New("removed")

// A wait is a passing state of a database's server, which a later pass tries again
// instead of putting the database in error: an error status would need a PUT.
type wait struct{ begins, ends string }

var (
	waitForSpace   = wait{"waits for disk space", "no longer waits for disk space"}
	waitForLoading = wait{"is still loading its data", "has loaded its data"}
	waitForAnswer  = wait{"is busy (a long script, or a machine too loaded for it to answer in time)", "answers again"}
)

// waiting reports whether err, from setting up a database's server, is a wait rather
// than a failure: the data dir's disk is full, the server runs but is still loading its
// data (a large dataset after a reboot takes longer than the start timeout), or it runs
// but is busy (a tenant's long script; a loaded machine): the driver restarts a server
// that stays busy too long. The database keeps its status; a wait is logged when it
// begins and when it ends.
func (r *Reconciler) waiting(id int, err error) bool {
	var now wait
	switch {
	case err == nil:
	case diskFull(err):
		now = waitForSpace
	case errors.Is(err, clouddb.ErrServerStarting):
		now = waitForLoading
	case errors.Is(err, clouddb.ErrServerBusy):
		now = waitForAnswer
	}
	r.mu.Lock()
	was := r.waits[id]
	if now != (wait{}) {
		r.waits[id] = now
	} else {
		delete(r.waits, id)
	}
	r.mu.Unlock()
	if was != now && was != (wait{}) {
		r.Logger.Info("database server "+was.ends, "database_id", id)
	}
	if was != now && now != (wait{}) {
		r.Logger.Warn("database server "+now.begins+"; it is tried again", "database_id", id, "err", err)
	}
	return now != (wait{})
}

// diskFull reports whether err is a full disk: a file clouddb wrote, or a redis-server
// that could not start for want of space, which the driver reports as ENOSPC. The text
// of an error is not enough: it carries the server's log, which a tenant can write to.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, clouddb.ErrStorageFull)
}

// ignoreGone makes a delete idempotent: a pass that read an older snapshot may delete a
// row that is already gone.
func ignoreGone(err error) error {
	if errors.Is(err, clouddb.ErrNotFound) {
		return nil
	}
	return err
}

// SourceEvent reports what happened to a source of a replicating database in the
// account's system log: each change of state once, not every retry.
func (r *Reconciler) SourceEvent(databaseID int, source, state, message string, err error) {
	r.init()
	key := strconv.Itoa(databaseID) + " " + source
	r.mu.Lock()
	if r.sourceStates == nil {
		r.sourceStates = map[string]string{}
	}
	same := r.sourceStates[key] == state
	r.sourceStates[key] = state
	r.mu.Unlock()
	if same {
		return
	}
	ctx := context.Background()
	var d *clouddb.Database
	if verr := r.Store.View(ctx, func(tx clouddb.Tx) error {
		var derr error // not err: that one is the source's, reported below
		d, derr = tx.Database(ctx, 0, databaseID)
		return derr
	}); verr != nil {
		return
	}
	text := fmt.Sprintf("Database %q (id %d): replica source %s is %s", d.Spec.Name, d.ID, source, state)
	if err != nil {
		text += ": " + err.Error()
	} else if message != "" {
		text += ": " + message
	}
	r.event(ctx, d.AccountID, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "%s", text)
}

// remember records that the driver runs in for database id (or forgets it on failure),
// and what that made of its named users (see noteUsers).
func (r *Reconciler) remember(id int, in clouddb.Instance, err error) {
	r.noteUsers(id, in, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		delete(r.ensured, id)
		return
	}
	r.ensured[id] = fingerprint(in)
}

func (r *Reconciler) removeDatabase(ctx context.Context, d *clouddb.Database) error {
	if !r.delay(ctx) {
		return nil
	}
	r.mu.Lock()
	r.removed[d.ID] = true
	r.mu.Unlock()
	if err := r.withDriver(ctx, func() error { return r.Driver.Remove(ctx, d.ID) }); err != nil {
		return err
	}
	if err := r.update(ctx, func(tx clouddb.Tx) error { return ignoreGone(tx.DeleteDatabase(ctx, d.ID)) }); err != nil {
		return err
	}
	r.remember(d.ID, clouddb.Instance{}, errRemoved)
	r.Notify()
	return nil
}

// removeOrphans removes the servers and data of databases that have no row: left behind
// when a crash came between a row's deletion and its server's removal, or by a store
// restored from an older copy.
func (r *Reconciler) removeOrphans(ctx context.Context, held []int, dbs []*clouddb.Database) {
	rows := make(map[int]bool, len(dbs))
	for _, d := range dbs {
		rows[d.ID] = true
	}
	heldNow := make(map[int]bool, len(held))
	r.mu.Lock()
	for _, id := range held {
		heldNow[id] = true
	}
	for id := range r.removed {
		if !heldNow[id] {
			delete(r.removed, id) // gone for good: no need to remember it
		}
	}
	r.mu.Unlock()
	for _, id := range held {
		r.mu.Lock()
		justRemoved := r.removed[id]
		r.mu.Unlock()
		if rows[id] || justRemoved {
			// A database removed between the listing and the read of the rows is no
			// orphan: its removal is done or under way.
			continue
		}
		r.spawn(ctx, "db:"+strconv.Itoa(id), func(ctx context.Context) error {
			r.Logger.Warn("removing a database server that no database wants", "database_id", id)
			return r.withDriver(ctx, func() error { return r.Driver.Remove(ctx, id) })
		}, nil)
	}
}

// superviseDatabase brings back the server of an active database that does not run as
// its instance says: after a restart of clouddb (adoption or restart on the same port), a
// crash of the server, a server off its port, or settings that drifted.
func (r *Reconciler) superviseDatabase(ctx context.Context, d *clouddb.Database, in clouddb.Instance) error {
	r.mu.Lock()
	known := r.ensured[d.ID] == fingerprint(in)
	r.mu.Unlock()
	if known {
		up, err := r.Driver.Running(ctx, in)
		if err != nil || up || ctx.Err() != nil {
			return err
		}
	}
	// Not running, or not ensured by this process yet: adopt or start it.
	r.usersInFlight(d.ID, in)
	err := r.withDriver(ctx, func() error { return r.Driver.Ensure(ctx, in) })
	if ctx.Err() != nil {
		return nil
	}
	r.remember(d.ID, in, err)
	if r.waiting(d.ID, err) {
		// Stays active, its server down or loading: a later pass starts or adopts it.
		r.setUsers(ctx, d, in)
		return nil
	}
	if err == nil && !known {
		// Adopted after a restart, or its sources or users changed: nothing to report,
		// but ACL rows may wait for it (see settleACL). When none did as of the last pass,
		// no pass is asked for: a pass that reads an ACL change made since starts after
		// remember recorded this database's users, and settles it.
		if r.aclPending.Load() {
			r.Notify()
		}
		return nil
	}
	if err != nil {
		// The cause is read here, outside the closure: a closure-local err once shadowed
		// it, and its nil .Error() panicked the whole process.
		cause := err.Error()
		// A server that runs is not stopped here: it may hold the only copy of the data
		// (no persistence), and what failed (a command timing out on a busy server) may
		// pass; the PUT that brings the database back adopts it.
		var set bool
		if uerr := r.update(ctx, func(tx clouddb.Tx) error {
			var serr error
			set, serr = tx.SetDatabaseStatus(ctx, d.ID, d.Generation, clouddb.DatabaseError, cause)
			return serr
		}); uerr != nil {
			return uerr
		}
		if set {
			r.event(ctx, d.AccountID, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) stopped and could not be restarted: %v", d.Spec.Name, d.ID, err)
		}
		return nil
	}
	r.event(ctx, d.AccountID, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) was not running as configured (stopped, not answering on its port, or its settings changed) and has been brought back on port %d", d.Spec.Name, d.ID, d.Port)
	return nil
}
