package postgres

import (
	"context"

	"clouddb"
)

// defaultLogLimit is how many log entries a filter without a Limit returns.
const defaultLogLimit = 100

// CreateLogEntry appends a log entry; Time defaults to the transaction's time.
func (tx *Tx) CreateLogEntry(ctx context.Context, e *clouddb.LogEntry) error {
	tx.stamp(&e.Time)
	id, err := tx.insert(ctx, "log_entries", e.ID, `INSERT INTO log_entries (id, account_id, time,
		originator, api_key_name, resource, resource_id, type, description)
		VALUES (`+newID("log_entries")+`, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
		e.AccountID, timeArg(e.Time), e.Originator, e.APIKeyName, e.Resource, e.ResourceID, e.Type, e.Description)
	if err != nil {
		return err
	}
	e.ID = id
	return nil
}

// LogEntries lists log entries newest first (by id, which is the order they were
// written in), at most f.Limit of them (100 when 0) after skipping f.Offset.
func (tx *Tx) LogEntries(ctx context.Context, f clouddb.LogFilter) ([]*clouddb.LogEntry, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id = " + w.arg(f.AccountID))
	}
	if f.ResourceID != 0 {
		w.add("resource_id = " + w.arg(f.ResourceID))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLogLimit
	}
	query := `SELECT id, account_id, time, originator, api_key_name, resource, resource_id, type,
		description FROM log_entries` + w.String() +
		` ORDER BY id DESC LIMIT ` + w.arg(limit) + ` OFFSET ` + w.arg(max(f.Offset, 0))
	return queryAll(ctx, tx.tx, query, w.args, func(s scanner) (*clouddb.LogEntry, error) {
		var e clouddb.LogEntry
		err := s.Scan(&e.ID, &e.AccountID, timeCol{&e.Time}, &e.Originator, &e.APIKeyName,
			&e.Resource, &e.ResourceID, &e.Type, &e.Description)
		return &e, err
	})
}
