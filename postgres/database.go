package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgtype"

	"clouddb"
	"clouddb/internal/rowform"
)

// replicaOfCol scans the sealed sources back.
type replicaOfCol struct {
	se  sealer
	dst *[]string
}

func (c replicaOfCol) ScanText(v pgtype.Text) error {
	var s string
	if err := c.se.col(&s).ScanText(v); err != nil {
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
	id, err := tx.insert(ctx, "databases", d.ID, `INSERT INTO databases (id, subscription_id,
		account_id, name, status, status_detail, port, password, replica_of, spec, state,
		generation, activated_on, created_at, updated_at)
		VALUES (`+newID("databases")+`, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		RETURNING id`,
		d.SubscriptionID, d.AccountID, d.Spec.Name, string(d.Status), d.StatusDetail, d.Port,
		tx.seal.Seal(d.Password), replicaOf, spec, state, d.Generation, timeArg(d.ActivatedOn),
		timeArg(d.CreatedAt), timeArg(d.UpdatedAt))
	if err != nil {
		return err
	}
	d.ID = id
	return nil
}

const databaseColumns = `id, subscription_id, account_id, status, status_detail, port, password,
	replica_of, spec, state, generation, activated_on, created_at, updated_at`

func (se sealer) scanDatabase(s scanner) (*clouddb.Database, error) {
	var d clouddb.Database
	err := s.Scan(&d.ID, &d.SubscriptionID, &d.AccountID, &d.Status, &d.StatusDetail, &d.Port,
		se.col(&d.Password), replicaOfCol{se, &d.ReplicaOf}, &d.Spec, &d.State, &d.Generation,
		timeCol{&d.ActivatedOn}, timeCol{&d.CreatedAt}, timeCol{&d.UpdatedAt})
	if err == nil {
		err = se.OpenSpec(&d.Spec)
	}
	return &d, err
}

// Database finds a database of the account (of any account for accountID 0), whatever
// its status.
func (tx *Tx) Database(ctx context.Context, accountID, id int) (*clouddb.Database, error) {
	var w where
	w.add("id = " + w.arg(id))
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return one(tx.seal.scanDatabase(tx.tx.QueryRow(ctx,
		`SELECT `+databaseColumns+` FROM databases`+w.String(), w.args...)))
}

// Databases lists databases by id; it also returns how many match before Offset/Limit.
func (tx *Tx) Databases(ctx context.Context, f clouddb.DatabaseFilter) ([]*clouddb.Database, int, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id = " + w.arg(f.AccountID))
	}
	if f.SubscriptionID != 0 {
		w.add("subscription_id = " + w.arg(f.SubscriptionID))
	}
	whereIn(&w, "status", f.Statuses)
	if f.ExcludeDeleting {
		// A literal, not a parameter: it matches the partial index's own condition, so the
		// planner can use the index whatever the parameters.
		w.add("status <> 'deleting'")
	}

	var total int
	if err := tx.tx.QueryRow(ctx, `SELECT COUNT(*) FROM databases`+w.String(), w.args...).
		Scan(&total); err != nil {
		return nil, 0, mapErr(err)
	}
	var limit any // NULL: no limit
	if f.Limit > 0 {
		limit = f.Limit
	}
	query := `SELECT ` + databaseColumns + ` FROM databases` + w.String() +
		` ORDER BY id LIMIT ` + w.arg(limit) + `::bigint OFFSET ` + w.arg(max(f.Offset, 0))
	dbs, err := queryAll(ctx, tx.tx, query, w.args, tx.seal.scanDatabase)
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
	err = mustAffect(tx.tx.Exec(ctx, `UPDATE databases SET name = $1, status = $2,
		status_detail = $3, port = $4, password = $5, replica_of = $6, spec = $7, state = $8,
		generation = $9, activated_on = $10, updated_at = $11
		WHERE id = $12`,
		d.Spec.Name, string(d.Status), d.StatusDetail, d.Port, tx.seal.Seal(d.Password), replicaOf,
		spec, state, d.Generation, timeArg(d.ActivatedOn), timeArg(tx.now), d.ID))
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
	return mustAffect(tx.tx.Exec(ctx, `UPDATE databases SET state = $1 WHERE id = $2`, state, id))
}

// DeleteDatabase deletes a database row, which frees its port.
func (tx *Tx) DeleteDatabase(ctx context.Context, id int) error {
	return mustAffect(tx.tx.Exec(ctx, `DELETE FROM databases WHERE id = $1`, id))
}

// SetDatabaseStatus sets status and detail if the generation still matches; moving to
// active also sets ActivatedOn the first time. It reports whether it did (false also for
// a missing row).
func (tx *Tx) SetDatabaseStatus(ctx context.Context, id, generation int, s clouddb.DatabaseStatus, detail string) (bool, error) {
	return affected(tx.tx.Exec(ctx, `UPDATE databases SET status = $1, status_detail = $2,
		activated_on = CASE WHEN $3::boolean AND activated_on IS NULL THEN $4::timestamptz ELSE activated_on END,
		updated_at = $4
		WHERE id = $5 AND generation = $6`,
		string(s), detail, s == clouddb.DatabaseActive, timeArg(tx.now), id, generation))
}

// UsedPorts lists the ports held by database rows, including those being deleted, in
// ascending order. Port 0 (none chosen) is not listed.
func (tx *Tx) UsedPorts(ctx context.Context) ([]int, error) {
	rows, err := tx.tx.Query(ctx, `SELECT port FROM databases WHERE port <> 0 ORDER BY port`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var ports []int
	for rows.Next() {
		var p int
		if err := rows.Scan(&p); err != nil {
			return nil, mapErr(err)
		}
		ports = append(ports, p)
	}
	return ports, mapErr(rows.Err())
}
