package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	err = tx.tx.QueryRow(ctx, `INSERT INTO tasks (id, account_id, api_key_name, command_type,
		status, subscription_id, database_id, cloud_account_id, payload, resource_id, resource,
		error, lease_owner, lease_expires_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
		RETURNING seq`,
		t.ID, t.AccountID, t.APIKeyName, t.CommandType, string(t.Status), t.SubscriptionID,
		t.DatabaseID, t.CloudAccountID, tx.seal.bytesArg(t.Payload), t.ResourceID, bytesOrNull(t.Resource),
		taskErr, t.LeaseOwner, timeArg(t.LeaseExpiresAt), timeArg(t.CreatedAt), timeArg(t.UpdatedAt)).
		Scan(&t.Seq)
	return mapErr(err)
}

const taskColumns = `seq, id, account_id, api_key_name, command_type, status, subscription_id,
	database_id, cloud_account_id, payload, resource_id, resource, error, lease_owner,
	lease_expires_at, created_at, updated_at`

func (se sealer) scanTask(s scanner) (*clouddb.Task, error) {
	var t clouddb.Task
	err := s.Scan(&t.Seq, &t.ID, &t.AccountID, &t.APIKeyName, &t.CommandType, &t.Status,
		&t.SubscriptionID, &t.DatabaseID, &t.CloudAccountID, se.bytesCol(&t.Payload), &t.ResourceID,
		&t.Resource, &t.Error, &t.LeaseOwner, timeCol{&t.LeaseExpiresAt}, timeCol{&t.CreatedAt},
		timeCol{&t.UpdatedAt})
	return &t, err
}

// Task finds a task of the account (of any account for accountID 0).
func (tx *Tx) Task(ctx context.Context, accountID int, id string) (*clouddb.Task, error) {
	var w where
	w.add("id = " + w.arg(id))
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return one(tx.seal.scanTask(tx.tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks`+w.String(), w.args...)))
}

// Tasks lists tasks updated at or after f.UpdatedSince, most recently updated first and,
// among equal times, most recently submitted first.
func (tx *Tx) Tasks(ctx context.Context, f clouddb.TaskFilter) ([]*clouddb.Task, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id = " + w.arg(f.AccountID))
	}
	if !f.UpdatedSince.IsZero() {
		w.add("updated_at >= " + w.arg(timeArg(f.UpdatedSince)))
	}
	limit := ""
	if f.Limit > 0 {
		limit = " LIMIT " + strconv.Itoa(f.Limit)
	}
	return queryAll(ctx, tx.tx, `SELECT `+taskColumns+` FROM tasks`+w.String()+
		` ORDER BY updated_at DESC, seq DESC`+limit, w.args, tx.seal.scanTask)
}

// FinishTask writes the task's status, resource id, resource and error, provided the task
// is still in progress under t.LeaseOwner; otherwise it returns ErrConflict and writes
// nothing. It keeps the lease fields as a record of which worker processed the task.
func (tx *Tx) FinishTask(ctx context.Context, t *clouddb.Task) error {
	if tx.claimed != "" && t.ID != tx.claimed {
		tx.finishedOther = true
	}
	taskErr, err := errorArg(t.Error)
	if err != nil {
		return err
	}
	const finish = `UPDATE tasks SET status = $1, resource_id = $2,
		resource = $3, error = $4, updated_at = $5
		WHERE id = $6 AND status = 'processing-in-progress' AND lease_owner = $7`
	args := []any{string(t.Status), t.ResourceID, bytesOrNull(t.Resource), taskErr, timeArg(tx.now), t.ID, t.LeaseOwner}
	conflict := func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: task %s is not in progress under lease owner %q", clouddb.ErrConflict, t.ID, t.LeaseOwner)
		}
		return nil
	}
	if t.ID == tx.claimed && t.LeaseOwner == tx.owner {
		// The task ProcessTasks claimed in this transaction, under the write lock: no
		// other worker can have taken it, so the finish cannot conflict and goes with
		// the next statement (the next claim, or the flush before the commit). Were it
		// to fail after all, that statement fails and the whole transaction with it.
		tx.tx.defer_(finish, args, func(tag pgconn.CommandTag) error { return mapErr(conflict(tag)) })
		t.UpdatedAt = tx.now
		return nil
	}
	tag, err := tx.tx.Exec(ctx, finish, args...)
	if err != nil {
		return mapErr(err)
	}
	if err := conflict(tag); err != nil {
		return err
	}
	t.UpdatedAt = tx.now
	return nil
}

// ExtendLease moves the lease of a task in progress under owner to until.
func (db *DB) ExtendLease(ctx context.Context, id, owner string, until time.Time) error {
	var ok bool
	err := db.write(ctx, func(tx pgx.Tx, _ time.Time) (bool, error) {
		var err error
		ok, err = affected(tx.Exec(ctx, `UPDATE tasks SET lease_expires_at = $1
			WHERE id = $2 AND status = 'processing-in-progress' AND lease_owner = $3`,
			timeArg(until), id, owner))
		return ok, err
	})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: task %s is not in progress under lease owner %q", clouddb.ErrConflict, id, owner)
	}
	return nil
}

// claimTask takes the lowest-seq task that is either received while its account has no
// task in progress, or in progress under a lease that expired before now ($3) or was
// never set. The literal statuses match the partial indexes' conditions. Writers hold
// the write lock, so SKIP LOCKED never has anything to skip today; it keeps the claim
// from queueing behind another claim should that lock ever go. Only tasks past seq $4
// are looked at (see ProcessTasks; 0 for all).
const claimTask = `UPDATE tasks SET status = 'processing-in-progress', lease_owner = $1,
	lease_expires_at = $2, updated_at = $3
	WHERE seq = (
		SELECT t.seq FROM tasks AS t
		WHERE t.status IN ('received', 'processing-in-progress') AND t.seq > $4
		AND (
			(t.status = 'received' AND NOT EXISTS (
				SELECT 1 FROM tasks AS p
				WHERE p.account_id = t.account_id AND p.status = 'processing-in-progress'))
			OR (t.status = 'processing-in-progress'
				AND (t.lease_expires_at IS NULL OR t.lease_expires_at < $3)))
		ORDER BY t.seq LIMIT 1
		FOR UPDATE SKIP LOCKED)
	RETURNING ` + taskColumns

// ClaimTask takes the oldest task that may be processed now and marks it in progress
// under a lease for owner until now+lease; it returns nil, nil when there is none. The
// task's UpdatedAt is now. It waits for the write lock, like Update.
func (db *DB) ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration) (*clouddb.Task, error) {
	var t *clouddb.Task
	err := db.write(ctx, func(tx pgx.Tx, _ time.Time) (bool, error) {
		var err error
		t, err = db.claim(ctx, &txConn{tx: tx}, owner, now, lease, 0)
		return t != nil, err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ProcessTasks claims tasks as ClaimTask does and runs fn on each in one transaction,
// under the write lock; see clouddb.Store.
func (db *DB) ProcessTasks(ctx context.Context, owner string, now time.Time, lease time.Duration, fn func(clouddb.Tx, *clouddb.Task) (bool, error)) ([]*clouddb.Task, error) {
	var tasks []*clouddb.Task
	err := db.write(ctx, func(tx pgx.Tx, txNow time.Time) (bool, error) {
		// write may run this again (a connection found broken before it): nothing of
		// an earlier try is kept.
		tasks = nil
		stx := &Tx{tx: &txConn{tx: tx}, now: txNow, seal: db.seal, owner: owner}
		// The claims of one transaction come in seq order as long as fn finishes no
		// task but the one it was given: with now fixed and the write lock held, only
		// such a finish makes a task claimable, its account's next one, which comes
		// after it. So each claim starts past the last one, instead of walking again
		// the index entries of every task finished since the last vacuum (in this
		// transaction too). A finish of another task (see Tx.FinishTask) makes the
		// claims start from the beginning again, lest an account's earlier task be
		// passed over for its later one.
		var after int64
		for more := true; more; {
			if stx.finishedOther {
				after = 0
			}
			t, err := db.claim(ctx, stx.tx, owner, now, lease, after)
			if err != nil {
				tasks = nil
				return false, err
			}
			if t == nil {
				break
			}
			after, stx.claimed = t.Seq, t.ID
			if more, err = fn(stx, t); err != nil {
				tasks = nil
				return false, err
			}
			tasks = append(tasks, t)
		}
		// What fn left pending (its last task's end) is sent before the commit.
		if err := stx.tx.flush(ctx); err != nil {
			tasks = nil
			return false, mapErr(err)
		}
		return len(tasks) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	return tasks, nil
}

// claim runs claimTask in tx, which holds the write lock; nil, nil when there is no task.
// The three statements go in one round trip.
func (db *DB) claim(ctx context.Context, c *txConn, owner string, now time.Time, lease time.Duration, after int64) (*clouddb.Task, error) {
	now = norm(now)
	b := &pgx.Batch{}
	// What waits in c (the previous task's end) goes first, in the same round trip: the
	// account's next task may be claimable once it is done.
	pending := c.pending
	c.pending = nil
	for _, p := range pending {
		b.Queue(p.sql, p.args...)
	}
	// The claim must walk tasks_claimable in seq order and stop at the first task it may
	// take. On statistics that lag a burst of new tasks, the planner prefers a bitmap
	// scan that tests every waiting task and sorts them (milliseconds per claim at ten
	// thousand waiting); the ordered index scan stays in microseconds. The setting is
	// put back right after, for the statements a task's processing runs in the same
	// transaction.
	b.Queue(`SET LOCAL enable_bitmapscan = off`)
	b.Queue(claimTask, owner, timeArg(now.Add(lease)), timeArg(now), after)
	b.Queue(`SET LOCAL enable_bitmapscan TO DEFAULT`)
	br := c.tx.SendBatch(ctx, b)
	pendErr := readPending(br, pending)
	_, setErr := br.Exec()
	t, claimErr := db.seal.scanTask(br.QueryRow())
	_, resetErr := br.Exec()
	closeErr := br.Close()
	if errors.Is(claimErr, pgx.ErrNoRows) {
		t, claimErr = nil, nil
	}
	// The first error is the cause; those after it are its consequences.
	for _, err := range []error{pendErr, setErr, claimErr, resetErr, closeErr} {
		if err != nil {
			return nil, mapErr(err)
		}
	}
	return t, nil
}

// PurgeTasks deletes finished tasks last updated before the given time.
func (db *DB) PurgeTasks(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx pgx.Tx, _ time.Time) (bool, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM tasks WHERE updated_at < $1
			AND status IN ('processing-completed', 'processing-error')`, timeArg(before))
		if err != nil {
			return false, mapErr(err)
		}
		n = tag.RowsAffected()
		return n > 0, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
