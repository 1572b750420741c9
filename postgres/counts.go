package postgres

import (
	"context"
	"time"

	"clouddb"
)

var _ clouddb.StatusCounter = (*DB)(nil)

// DatabaseCounts counts the databases by status: one pass over a table that holds a row
// per database.
func (db *DB) DatabaseCounts(ctx context.Context) (map[clouddb.DatabaseStatus]int, error) {
	var counts map[clouddb.DatabaseStatus]int
	err := db.View(ctx, func(t clouddb.Tx) error {
		counts = map[clouddb.DatabaseStatus]int{}
		rows, err := t.(*Tx).tx.Query(ctx, `SELECT status, COUNT(*) FROM databases GROUP BY status`)
		if err != nil {
			return mapErr(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				return mapErr(err)
			}
			counts[clouddb.DatabaseStatus(s)] = n
		}
		return mapErr(rows.Err())
	})
	return counts, err
}

// TaskQueue counts the unfinished tasks, through the partial index tasks_claimable, so
// only unfinished tasks are read, however long the history.
func (db *DB) TaskQueue(ctx context.Context) (clouddb.TaskQueue, error) {
	var q clouddb.TaskQueue
	err := db.View(ctx, func(t clouddb.Tx) error {
		q = clouddb.TaskQueue{}
		rows, err := t.(*Tx).tx.Query(ctx, `SELECT status, COUNT(*), MIN(created_at) FROM tasks
			WHERE status IN ('received', 'processing-in-progress') GROUP BY status`)
		if err != nil {
			return mapErr(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var n int
			var oldest time.Time
			if err := rows.Scan(&s, &n, timeCol{&oldest}); err != nil {
				return mapErr(err)
			}
			if clouddb.TaskStatus(s) == clouddb.TaskReceived {
				q.Received, q.OldestReceived = n, oldest
			} else {
				q.InProgress = n
			}
		}
		return mapErr(rows.Err())
	})
	return q, err
}
