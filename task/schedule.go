package task

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"clouddb"
	"clouddb/internal/storehealth"
)

// DefaultBackupCheck is how often the periodic-backup schedule is checked.
const DefaultBackupCheck = 30 * time.Second

// intervalHours maps a backup interval to its length in hours.
var intervalHours = map[string]int{
	"every-24-hours": 24, "every-12-hours": 12, "every-6-hours": 6,
	"every-4-hours": 4, "every-2-hours": 2, "every-1-hours": 1,
}

// backupSchedule is the interval and time of day of a database's periodic backups; ok is
// false when they are off.
func backupSchedule(s *clouddb.DatabaseSpec) (every time.Duration, at time.Duration, ok bool) {
	if backupDestination(s) == "" {
		return 0, 0, false
	}
	interval, timeUTC := clouddb.DefaultBackupInterval, ""
	if b := s.RemoteBackup; b != nil && b.Active {
		if b.Interval != "" {
			interval = b.Interval
		}
		timeUTC = b.TimeUTC
	}
	h, known := intervalHours[interval]
	if !known {
		return 0, 0, false
	}
	if hh, mm, found := strings.Cut(timeUTC, ":"); found {
		hours, _ := strconv.Atoi(hh)
		minutes, _ := strconv.Atoi(mm)
		at = time.Duration(hours)*time.Hour + time.Duration(minutes)*time.Minute
	}
	return time.Duration(h) * time.Hour, at, true
}

// lastWindow is the latest backup window at or before now: the windows fall at the time
// of day `at` and every `every` after it.
func lastWindow(now time.Time, every, at time.Duration) time.Time {
	now = now.UTC()
	anchor := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).Add(at)
	if anchor.After(now) {
		anchor = anchor.Add(-24 * time.Hour)
	}
	return anchor.Add(now.Sub(anchor) / every * every)
}

// backupDue reports the window a database's periodic backup is due for, if any: the
// latest window that passed after its last backup began and after its backups were
// configured (approximated by its last change).
func backupDue(d *clouddb.Database, now time.Time) (time.Time, bool) {
	every, at, ok := backupSchedule(&d.Spec)
	if !ok || (d.Status != clouddb.DatabaseActive && d.Status != clouddb.DatabaseChangePending) {
		return time.Time{}, false
	}
	window := lastWindow(now, every, at)
	since := d.UpdatedAt
	if b := d.State.Backup; b != nil && b.Time.After(since) {
		since = b.Time
	}
	return window, window.After(since)
}

// scheduleBackups submits one backup task for every database whose periodic backup is
// due. A window missed while clouddb was down is caught up once after it starts, since
// only the latest window counts. A database whose backup task is still queued is
// skipped.
func (e *Engine) scheduleBackups(ctx context.Context) error {
	var dbs []*clouddb.Database
	var queued map[int]bool
	if err := e.Store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		if dbs, _, err = tx.Databases(ctx, clouddb.DatabaseFilter{ExcludeDeleting: true}); err != nil {
			return err
		}
		queued, err = pendingBackups(ctx, tx, e.Now())
		return err
	}); err != nil {
		return err
	}
	now := e.Now()
	for _, d := range dbs {
		window, due := backupDue(d, now)
		if !due || queued[d.ID] {
			continue
		}
		t := &clouddb.Task{AccountID: d.AccountID, APIKeyName: "periodic-backup", CommandType: clouddb.CommandDatabaseBackup,
			SubscriptionID: d.SubscriptionID, DatabaseID: d.ID}
		if err := e.Submit(ctx, t); err != nil {
			return fmt.Errorf("submit the periodic backup of database %d: %w", d.ID, err)
		}
		e.Logger.Info("periodic backup due", "database_id", d.ID, "window", window, "task", t.ID)
	}
	return nil
}

// pendingBackups lists the databases that have a backup task not yet finished.
func pendingBackups(ctx context.Context, tx clouddb.Tx, now time.Time) (map[int]bool, error) {
	tasks, err := tx.Tasks(ctx, clouddb.TaskFilter{UpdatedSince: now.Add(-clouddb.TaskHistory)})
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, t := range tasks {
		if t.CommandType == clouddb.CommandDatabaseBackup && !t.Status.Final() {
			out[t.DatabaseID] = true
		}
	}
	return out, nil
}

func (e *Engine) backupLoop(ctx context.Context) {
	every := e.BackupCheck
	if every <= 0 {
		every = DefaultBackupCheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		e.scheduleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scheduleOnce submits the periodic backups due now; a panic there is logged and the
// next round runs.
func (e *Engine) scheduleOnce(ctx context.Context) {
	defer e.recoverLoop("periodic backups")
	err := e.scheduleBackups(ctx)
	switch {
	case err == nil || ctx.Err() != nil:
	case storehealth.Down(err):
		e.health.Failed(err) // logged once with the workers' state
	default:
		e.Logger.Error("periodic backups", "err", err)
	}
}
