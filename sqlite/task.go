package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"clouddb"
)

// errorArg stores a task error as JSON, no error as NULL.
func errorArg(e *clouddb.TaskError) (any, error) {
	if e == nil {
		return nil, nil
	}
	return jsonArg(e)
}

// CreateTask inserts a task. The store assigns Seq, the submission order; ID defaults to a
// random UUID and Status to received. A second in-progress task of one account is a
// conflict.
func (tx *Tx) CreateTask(ctx context.Context, t *clouddb.Task) error {
	tx.stamp(&t.CreatedAt, &t.UpdatedAt)
	t.LeaseExpiresAt = norm(t.LeaseExpiresAt)
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	if t.Status == "" {
		t.Status = clouddb.TaskReceived
	}
	taskErr, err := errorArg(t.Error)
	if err != nil {
		return err
	}
	res, err := tx.tx.ExecContext(ctx, `INSERT INTO tasks (id, account_id, api_key_name,
		command_type, status, subscription_id, database_id, cloud_account_id, payload,
		resource_id, resource, error, lease_owner, lease_expires_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.AccountID, t.APIKeyName, t.CommandType, string(t.Status), t.SubscriptionID,
		t.DatabaseID, t.CloudAccountID, tx.seal.bytesArg(t.Payload), t.ResourceID, bytesOrNull(t.Resource), taskErr, t.LeaseOwner,
		timeArg(t.LeaseExpiresAt), timeArg(t.CreatedAt), timeArg(t.UpdatedAt))
	if err != nil {
		return mapErr(err)
	}
	t.Seq, err = res.LastInsertId()
	return err
}

const taskColumns = `seq, id, account_id, api_key_name, command_type, status, subscription_id,
	database_id, cloud_account_id, payload, resource_id, resource, error, lease_owner,
	lease_expires_at, created_at, updated_at`

func (se sealer) scanTask(s scanner) (*clouddb.Task, error) {
	var t clouddb.Task
	err := s.Scan(&t.Seq, &t.ID, &t.AccountID, &t.APIKeyName, &t.CommandType, &t.Status,
		&t.SubscriptionID, &t.DatabaseID, &t.CloudAccountID, se.bytesCol(&t.Payload), &t.ResourceID,
		rawCol{&t.Resource}, jsonCol{&t.Error}, &t.LeaseOwner, timeCol{&t.LeaseExpiresAt}, timeCol{&t.CreatedAt},
		timeCol{&t.UpdatedAt})
	return &t, err
}

// Task finds a task of the account (of any account for accountID 0).
func (tx *Tx) Task(ctx context.Context, accountID int, id string) (*clouddb.Task, error) {
	var w where
	w.add("id = ?", id)
	if accountID != 0 {
		w.add("account_id = ?", accountID)
	}
	return one(tx.seal.scanTask(tx.tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks`+w.String(), w.args...)))
}

// Tasks lists tasks updated at or after f.UpdatedSince, most recently updated first and,
// among equal times, most recently submitted first.
func (tx *Tx) Tasks(ctx context.Context, f clouddb.TaskFilter) ([]*clouddb.Task, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id = ?", f.AccountID)
	}
	if !f.UpdatedSince.IsZero() {
		w.add("updated_at >= ?", timeArg(norm(f.UpdatedSince)))
	}
	limit := ""
	if f.Limit > 0 {
		limit = " LIMIT " + strconv.Itoa(f.Limit)
	}
	return queryAll(ctx, tx.tx, `SELECT `+taskColumns+` FROM tasks`+w.String()+
		` ORDER BY updated_at DESC, seq DESC`+limit, w.args, tx.seal.scanTask)
}

// FinishTask writes the task's status, resource id and error, provided the task is still
// in progress under t.LeaseOwner; otherwise it returns ErrConflict and writes nothing.
// It keeps the lease fields as a record of which worker processed the task.
func (tx *Tx) FinishTask(ctx context.Context, t *clouddb.Task) error {
	taskErr, err := errorArg(t.Error)
	if err != nil {
		return err
	}
	res, err := tx.tx.ExecContext(ctx, `UPDATE tasks SET status = ?, resource_id = ?, resource = ?,
		error = ?, updated_at = ?
		WHERE id = ? AND status = 'processing-in-progress' AND lease_owner = ?`,
		string(t.Status), t.ResourceID, bytesOrNull(t.Resource), taskErr, timeArg(tx.now), t.ID, t.LeaseOwner)
	if err != nil {
		return mapErr(err)
	}
	if ok, err := affected(res); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: task %s is not in progress under lease owner %q", clouddb.ErrConflict, t.ID, t.LeaseOwner)
	}
	t.UpdatedAt = tx.now
	return nil
}

// ExtendLease moves the lease of a task in progress under owner to until.
func (db *DB) ExtendLease(ctx context.Context, id, owner string, until time.Time) error {
	res, err := db.writer.ExecContext(ctx, `UPDATE tasks SET lease_expires_at = ?
		WHERE id = ? AND status = 'processing-in-progress' AND lease_owner = ?`,
		timeArg(norm(until)), id, owner)
	if err != nil {
		return mapErr(err)
	}
	if ok, err := affected(res); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: task %s is not in progress under lease owner %q", clouddb.ErrConflict, id, owner)
	}
	db.version.Add(1)
	return nil
}

// claimTask takes, in one statement, the lowest-seq task that is either received while
// its account has no task in progress, or in progress under a lease that expired (or was
// never set). The literal statuses match the partial indexes, which SQLite only uses when
// the query repeats their conditions.
const claimTask = `UPDATE tasks SET status = 'processing-in-progress', lease_owner = ?,
	lease_expires_at = ?, updated_at = ?
	WHERE seq = (
		SELECT t.seq FROM tasks AS t
		WHERE t.status IN ('received', 'processing-in-progress')
		AND (
			(t.status = 'received' AND NOT EXISTS (
				SELECT 1 FROM tasks AS p
				WHERE p.account_id = t.account_id AND p.status = 'processing-in-progress'))
			OR (t.status = 'processing-in-progress'
				AND (t.lease_expires_at IS NULL OR t.lease_expires_at < ?)))
		ORDER BY t.seq LIMIT 1)
	RETURNING ` + taskColumns

// ClaimTask takes the oldest task that may be processed now and marks it in progress
// under a lease for owner until now+lease; it returns nil, nil when there is none. The
// task's UpdatedAt is now. It runs on the writer, so it waits for a running Update.
func (db *DB) ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration) (*clouddb.Task, error) {
	now = norm(now)
	t, err := db.seal.scanTask(db.writer.QueryRowContext(ctx, claimTask,
		owner, timeArg(norm(now.Add(lease))), timeArg(now), timeArg(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err)
	}
	db.version.Add(1)
	return t, nil
}

// ProcessTasks claims tasks as ClaimTask does and runs fn on each in one transaction on
// the writer; see clouddb.Store.
func (db *DB) ProcessTasks(ctx context.Context, owner string, now time.Time, lease time.Duration, fn func(clouddb.Tx, *clouddb.Task) (bool, error)) ([]*clouddb.Task, error) {
	now = norm(now)
	sqlTx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapErr(err)
	}
	// A failed fn, or a claim that found nothing, leaves the file as it was.
	defer func() { _ = sqlTx.Rollback() }()
	conn := &txConn{tx: sqlTx, cache: db.stmts}
	tx := &Tx{tx: conn, now: db.now(), seal: db.seal}
	var tasks []*clouddb.Task
	for more := true; more; {
		t, err := db.seal.scanTask(conn.QueryRowContext(ctx, claimTask,
			owner, timeArg(norm(now.Add(lease))), timeArg(now), timeArg(now)))
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return nil, mapErr(err)
		}
		if more, err = fn(tx, t); err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	if len(tasks) == 0 {
		return nil, nil
	}
	if err := sqlTx.Commit(); err != nil {
		return nil, mapErr(err)
	}
	db.version.Add(1)
	conn.committed(ctx)
	return tasks, nil
}

// PurgeTasks deletes finished tasks last updated before the given time.
func (db *DB) PurgeTasks(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.writer.ExecContext(ctx, `DELETE FROM tasks WHERE updated_at < ? AND status IN (?, ?)`,
		timeArg(norm(before)), clouddb.TaskCompleted, clouddb.TaskFailed)
	if err != nil {
		return 0, mapErr(err)
	}
	n, err := res.RowsAffected()
	if n > 0 {
		db.version.Add(1)
	}
	return n, err
}
