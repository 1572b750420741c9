package reconcile

import (
	"context"
	"strconv"

	"clouddb"
)

func (r *Reconciler) database(ctx context.Context, d *clouddb.Database) {
	key := "db:" + strconv.Itoa(d.ID)
	switch d.Status {
	case clouddb.DatabasePending, clouddb.DatabaseChangePending:
		r.spawn(ctx, key, func(ctx context.Context) error { return r.provisionDatabase(ctx, d) })
	case clouddb.DatabaseDeleting:
		r.spawn(ctx, key, func(ctx context.Context) error { return r.removeDatabase(ctx, d) })
	case clouddb.DatabaseActive:
		r.spawn(ctx, key, func(ctx context.Context) error { return r.superviseDatabase(ctx, d) })
	}
}

// provisionDatabase makes the server match the database's generation and settles its
// status, unless a newer change arrived meanwhile (the next pass handles that one).
func (r *Reconciler) provisionDatabase(ctx context.Context, d *clouddb.Database) error {
	if !r.delay(ctx) {
		return nil
	}
	err := r.withDriver(ctx, func() error { return r.Driver.Ensure(ctx, clouddb.InstanceOf(d)) })
	if ctx.Err() != nil {
		return nil
	}
	status, detail := clouddb.DatabaseActive, ""
	if err != nil {
		status, detail = clouddb.DatabaseError, err.Error()
	}
	var set bool
	if uerr := r.Store.Update(ctx, func(tx clouddb.Tx) error {
		var err error
		set, err = tx.SetDatabaseStatus(ctx, d.ID, d.Generation, status, detail)
		return err
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
	}
	r.Notify() // its subscription may be waiting for it
	return nil
}

func (r *Reconciler) removeDatabase(ctx context.Context, d *clouddb.Database) error {
	if !r.delay(ctx) {
		return nil
	}
	if err := r.withDriver(ctx, func() error { return r.Driver.Remove(ctx, d.ID) }); err != nil {
		return err
	}
	if err := r.Store.Update(ctx, func(tx clouddb.Tx) error { return tx.DeleteDatabase(ctx, d.ID) }); err != nil {
		return err
	}
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
	for _, id := range held {
		if rows[id] {
			continue
		}
		r.spawn(ctx, "db:"+strconv.Itoa(id), func(ctx context.Context) error {
			r.Logger.Warn("removing a database server that no database wants", "database_id", id)
			return r.withDriver(ctx, func() error { return r.Driver.Remove(ctx, id) })
		})
	}
}

// superviseDatabase restarts the server of an active database when it is not running:
// after a restart of clouddb (adoption or restart on the same port) or a crash of the
// server itself.
func (r *Reconciler) superviseDatabase(ctx context.Context, d *clouddb.Database) error {
	in := clouddb.InstanceOf(d)
	up, err := r.Driver.Running(ctx, in)
	if err != nil || up || ctx.Err() != nil {
		return err
	}
	err = r.withDriver(ctx, func() error { return r.Driver.Ensure(ctx, in) })
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		var set bool
		if uerr := r.Store.Update(ctx, func(tx clouddb.Tx) error {
			var err error
			set, err = tx.SetDatabaseStatus(ctx, d.ID, d.Generation, clouddb.DatabaseError, err.Error())
			return err
		}); uerr != nil {
			return uerr
		}
		if set {
			r.event(ctx, d.AccountID, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) stopped and could not be restarted: %v", d.Spec.Name, d.ID, err)
		}
		return nil
	}
	r.event(ctx, d.AccountID, clouddb.LogTypeDatabase, d.Spec.Name, d.ID, "Database %q (id %d) was not running and has been started again on port %d", d.Spec.Name, d.ID, d.Port)
	return nil
}
