package sqlite

import (
	"context"

	"clouddb"
)

// defaultLogLimit is how many log entries a filter without a Limit returns.
const defaultLogLimit = 100

// CreateLogEntry appends a log entry; Time defaults to the transaction's time.
func (tx *Tx) CreateLogEntry(ctx context.Context, e *clouddb.LogEntry) error {
	tx.stamp(&e.Time)
	res, err := tx.tx.ExecContext(ctx, `INSERT INTO log_entries (id, account_id, time, originator,
		api_key_name, resource, resource_id, type, description)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		idArg(e.ID), e.AccountID, timeArg(e.Time), e.Originator, e.APIKeyName, e.Resource,
		e.ResourceID, e.Type, e.Description)
	if err != nil {
		return mapErr(err)
	}
	id, err := res.LastInsertId()
	e.ID = int(id)
	return err
}

// LogEntries lists log entries newest first (by id, which is the order they were
// written in), at most f.Limit of them (100 when 0) after skipping f.Offset.
func (tx *Tx) LogEntries(ctx context.Context, f clouddb.LogFilter) ([]*clouddb.LogEntry, error) {
	var w where
	if f.AccountID != 0 {
		w.add("account_id = ?", f.AccountID)
	}
	if f.ResourceID != 0 {
		w.add("resource_id = ?", f.ResourceID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLogLimit
	}
	args := append(w.args, limit, max(f.Offset, 0))
	return queryAll(ctx, tx.tx, `SELECT id, account_id, time, originator, api_key_name, resource,
		resource_id, type, description FROM log_entries`+w.String()+
		` ORDER BY id DESC LIMIT ? OFFSET ?`, args,
		func(s scanner) (*clouddb.LogEntry, error) {
			var e clouddb.LogEntry
			err := s.Scan(&e.ID, &e.AccountID, timeCol{&e.Time}, &e.Originator, &e.APIKeyName,
				&e.Resource, &e.ResourceID, &e.Type, &e.Description)
			return &e, err
		})
}
