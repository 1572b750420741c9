package sqlite

import (
	"context"

	"clouddb"
	"clouddb/internal/rowform"
)

// replicaOfCol scans the sealed sources back.
type replicaOfCol struct {
	se  sealer
	dst *[]string
}

func (c replicaOfCol) Scan(src any) error {
	var s string
	if err := c.se.col(&s).Scan(src); err != nil {
		return err
	}
	return rowform.OpenSources(s, c.dst)
}

// CreateDatabase inserts a database; an unset Generation becomes 1. The name (Spec.Name)
// must be free in the subscription among databases not being deleted, and a non-zero port
// free among all databases; otherwise it returns ErrConflict.
func (tx *Tx) CreateDatabase(ctx context.Context, d *clouddb.Database) error {
	tx.stamp(&d.CreatedAt, &d.UpdatedAt)
	d.ActivatedOn = norm(d.ActivatedOn)
	if d.Generation == 0 {
		d.Generation = 1
	}
	spec, err := tx.seal.Spec(d)
	if err != nil {
		return err
	}
	state, err := rowform.State(d.State)
	if err != nil {
		return err
	}
	replicaOf, err := tx.seal.Sources(d.ReplicaOf)
	if err != nil {
		return err
	}
	res, err := tx.tx.ExecContext(ctx, `INSERT INTO databases (id, subscription_id, account_id,
		name, status, status_detail, port, password, replica_of, spec, state, generation, activated_on, created_at,
		updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		idArg(d.ID), d.SubscriptionID, d.AccountID, d.Spec.Name, string(d.Status), d.StatusDetail,
		d.Port, tx.seal.Seal(d.Password), replicaOf, spec, state, d.Generation, timeArg(d.ActivatedOn), timeArg(d.CreatedAt),
		timeArg(d.UpdatedAt))
	if err != nil {
		return mapErr(err)
	}
	id, err := res.LastInsertId()
	d.ID = int(id)
	return err
}

const databaseColumns = `id, subscription_id, account_id, status, status_detail, port, password,
	replica_of, spec, state, generation, activated_on, created_at, updated_at`

func (se sealer) scanDatabase(s scanner) (*clouddb.Database, error) {
	var d clouddb.Database
	err := s.Scan(&d.ID, &d.SubscriptionID, &d.AccountID, &d.Status, &d.StatusDetail, &d.Port,
		se.col(&d.Password), replicaOfCol{se, &d.ReplicaOf}, jsonCol{&d.Spec}, jsonCol{&d.State}, &d.Generation, timeCol{&d.ActivatedOn},
		timeCol{&d.CreatedAt}, timeCol{&d.UpdatedAt})
	if err == nil {
		err = se.OpenSpec(&d.Spec)
	}
	return &d, err
}

// Database finds a database of the account (of any account for accountID 0), whatever
// its status.
func (tx *Tx) Database(ctx context.Context, accountID, id int) (*clouddb.Database, error) {
	var w where
	w.add("id = ?", id)
	if accountID != 0 {
		w.add("account_id = ?", accountID)
	}
	return one(tx.seal.scanDatabase(tx.tx.QueryRowContext(ctx,
		`SELECT `+databaseColumns+` FROM databases`+w.String(), w.args...)))
}

// Databases lists databases by id; it also returns how many match before Offset/Limit.
func (tx *Tx) Databases(ctx context.Context, f clouddb.DatabaseFilter) ([]*clouddb.Database, int, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id = ?", f.AccountID)
	}
	if f.SubscriptionID != 0 {
		w.add("subscription_id = ?", f.SubscriptionID)
	}
	whereIn(&w, "status", f.Statuses)
	if f.ExcludeDeleting {
		// A literal, not a parameter: it matches the partial index's own condition, which
		// lets SQLite use the index without planning the statement again on every call.
		w.add("status <> 'deleting'")
	}

	var total int
	if err := tx.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM databases`+w.String(), w.args...).
		Scan(&total); err != nil {
		return nil, 0, mapErr(err)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1 // SQLite for "no limit"
	}
	args := append(w.args, limit, max(f.Offset, 0))
	dbs, err := queryAll(ctx, tx.tx, `SELECT `+databaseColumns+` FROM databases`+w.String()+
		` ORDER BY id LIMIT ? OFFSET ?`, args, tx.seal.scanDatabase)
	if err != nil {
		return nil, 0, err
	}
	return dbs, total, nil
}

// UpdateDatabase writes every field but the ids and CreatedAt, Generation included: the
// caller advances it for a change the reconciler must apply (Spec or Password), so that a
// status settled for an older generation is refused. It sets d.UpdatedAt. A name or port
// taken by another database is a conflict.
func (tx *Tx) UpdateDatabase(ctx context.Context, d *clouddb.Database) error {
	d.ActivatedOn = norm(d.ActivatedOn)
	spec, err := tx.seal.Spec(d)
	if err != nil {
		return err
	}
	state, err := rowform.State(d.State)
	if err != nil {
		return err
	}
	replicaOf, err := tx.seal.Sources(d.ReplicaOf)
	if err != nil {
		return err
	}
	err = mustAffect(tx.tx.ExecContext(ctx, `UPDATE databases SET name = ?, status = ?,
		status_detail = ?, port = ?, password = ?, replica_of = ?, spec = ?, state = ?, generation = ?,
		activated_on = ?, updated_at = ?
		WHERE id = ?`,
		d.Spec.Name, string(d.Status), d.StatusDetail, d.Port, tx.seal.Seal(d.Password), replicaOf, spec, state, d.Generation,
		timeArg(d.ActivatedOn), timeArg(tx.now), d.ID))
	if err != nil {
		return err
	}
	d.UpdatedAt = tx.now
	return nil
}

// SetDatabaseState records the outcome of data operations; it touches nothing else, not
// even UpdatedAt (the configuration did not change).
func (tx *Tx) SetDatabaseState(ctx context.Context, id int, s clouddb.DatabaseState) error {
	state, err := rowform.State(s)
	if err != nil {
		return err
	}
	return mustAffect(tx.tx.ExecContext(ctx, `UPDATE databases SET state = ? WHERE id = ?`, state, id))
}

// DeleteDatabase deletes a database row, which frees its port.
func (tx *Tx) DeleteDatabase(ctx context.Context, id int) error {
	return mustAffect(tx.tx.ExecContext(ctx, `DELETE FROM databases WHERE id = ?`, id))
}

// SetDatabaseStatus sets status and detail if the generation still matches; moving to
// active also sets ActivatedOn the first time. It reports whether it did (false also for
// a missing row).
func (tx *Tx) SetDatabaseStatus(ctx context.Context, id, generation int, s clouddb.DatabaseStatus, detail string) (bool, error) {
	now := timeArg(tx.now)
	res, err := tx.tx.ExecContext(ctx, `UPDATE databases SET status = ?, status_detail = ?,
		activated_on = CASE WHEN ? AND activated_on IS NULL THEN ? ELSE activated_on END,
		updated_at = ?
		WHERE id = ? AND generation = ?`,
		string(s), detail, s == clouddb.DatabaseActive, now, now, id, generation)
	if err != nil {
		return false, mapErr(err)
	}
	return affected(res)
}

// UsedPorts lists the ports held by database rows, including those being deleted, in
// ascending order. Port 0 (none chosen) is not listed.
func (tx *Tx) UsedPorts(ctx context.Context) ([]int, error) {
	rows, err := tx.tx.QueryContext(ctx, `SELECT port FROM databases WHERE port <> 0 ORDER BY port`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var ports []int
	for rows.Next() {
		var p int
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, rows.Err()
}
