package task

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"

	"clouddb"
	"clouddb/blob"
	"clouddb/redisdata"
)

// Backups and imports are jobs: their work (a snapshot written to storage, sources loaded
// into the database) runs outside any transaction, and the database's backup or import
// status is recorded together with the task's end.

// backupRequest is the optional body of POST …/backup.
type backupRequest struct {
	AdhocBackupPath string `json:"adhocBackupPath,omitempty"`
}

// dataTarget reads the database a data job works on; it must be running.
func (e *Engine) dataTarget(ctx context.Context, t *clouddb.Task) (*clouddb.Database, error) {
	var d *clouddb.Database
	err := e.Store.View(ctx, func(tx clouddb.Tx) error {
		if _, err := findSubscription(ctx, tx, t.AccountID, t.SubscriptionID); err != nil {
			return err
		}
		var err error
		d, err = findDatabase(ctx, tx, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	if d.Status != clouddb.DatabaseActive && d.Status != clouddb.DatabaseChangePending {
		return nil, clouddb.Conflict("DATABASE_NOT_ACTIVE", "database %d is %s; wait until it is active", d.ID, d.Status)
	}
	if e.Driver == nil {
		return nil, fmt.Errorf("no data plane to move data of database %d", d.ID)
	}
	return d, nil
}

// logEvent writes a data operation into the account's system log.
func (e *Engine) logEvent(ctx context.Context, tx clouddb.Tx, t *clouddb.Task, d *clouddb.Database, text string) error {
	return tx.CreateLogEntry(ctx, &clouddb.LogEntry{AccountID: d.AccountID, Time: e.Now(), Originator: "API", APIKeyName: t.APIKeyName,
		Resource: d.Spec.Name, ResourceID: d.ID, Type: clouddb.LogTypeDatabase, Description: text})
}

// setOperation records a backup's or an import's status on the database, in tx.
func setOperation(ctx context.Context, tx clouddb.Tx, id int, backup bool, op *clouddb.OperationStatus) error {
	d, err := tx.Database(ctx, 0, id)
	if errors.Is(err, clouddb.ErrNotFound) {
		return nil // deleted meanwhile: nothing to record on
	} else if err != nil {
		return err
	}
	st := d.State
	if backup {
		st.Backup = op
	} else {
		st.Import = op
	}
	return tx.SetDatabaseState(ctx, id, st)
}

func (e *Engine) markStarted(ctx context.Context, id int, backup bool, status string) error {
	return e.Store.Update(ctx, func(tx clouddb.Tx) error {
		return setOperation(ctx, tx, id, backup, &clouddb.OperationStatus{Status: status, Time: e.Now()})
	})
}

func backupDatabase(ctx context.Context, e *Engine, t *clouddb.Task) (*outcome, error) {
	var req backupRequest
	if len(t.Payload) > 0 {
		if err := decode(t, &req); err != nil {
			return nil, err
		}
	}
	d, err := e.dataTarget(ctx, t)
	if err != nil {
		return nil, err
	}
	dest := req.AdhocBackupPath
	if dest == "" {
		dest = backupDestination(&d.Spec)
	}
	if dest == "" {
		return nil, errBackupDisabled(d)
	}
	if err = e.markStarted(ctx, d.ID, true, clouddb.OperationInProgress); err != nil {
		return nil, err
	}
	loc, err := e.backup(ctx, d, dest)
	if dt := dataTimeout(ctx); err != nil && dt != nil {
		err = fmt.Errorf("the backup %w", dt)
	}
	op := &clouddb.OperationStatus{Status: clouddb.OperationSuccess, Time: e.Now(), Location: blob.Redact(loc)}
	out := &outcome{resourceID: d.ID}
	if err != nil {
		reason := failureReason(err)
		op = &clouddb.OperationStatus{Status: clouddb.OperationFailed, Time: e.Now(), FailureReason: reason}
		out.err = clouddb.Errorf(http.StatusBadRequest, "DATABASE_BACKUP_FAILED", "backup of database %d failed (%s): %s", d.ID, reason, err)
	}
	out.record = func(ctx context.Context, tx clouddb.Tx) error {
		text := fmt.Sprintf("Backup of database %q (id %d) written to %s", d.Spec.Name, d.ID, op.Location)
		if op.Status == clouddb.OperationFailed {
			text = fmt.Sprintf("Backup of database %q (id %d) failed: %s", d.Spec.Name, d.ID, op.FailureReason)
		}
		if err := e.logEvent(ctx, tx, t, d, text); err != nil {
			return err
		}
		return setOperation(ctx, tx, d.ID, true, op)
	}
	out.resource = backupStatusView{Status: op.Status, LastBackupTime: rfc3339(op), FailureReason: op.FailureReason, Location: op.Location}
	return out, nil
}

// backup streams a snapshot of d into a file named after it and the time under dest, one
// file per shard: an OSS Cluster database's backup is in parts, named …-part1of3.rdb and
// so on, which an import takes together. It returns the location of the first file.
func (e *Engine) backup(ctx context.Context, d *clouddb.Database, dest string) (string, error) {
	in := clouddb.InstanceOf(d)
	base := fmt.Sprintf("%s-%d-%s", d.Spec.Name, d.ID, e.Now().UTC().Format("20060102T150405Z"))
	if in.Shards <= 1 {
		return e.backupPart(ctx, d, in, 0, dest, base+".rdb")
	}
	var first string
	for s := range in.Shards {
		loc, err := e.backupPart(ctx, d, in, s, dest, fmt.Sprintf("%s-part%dof%d.rdb", base, s+1, in.Shards))
		if err != nil {
			return "", fmt.Errorf("part %d of %d: %w", s+1, in.Shards, err)
		}
		if s == 0 {
			first = loc
		}
	}
	return first, nil
}

// backupPart streams the snapshot of one shard of d into the file name under dest.
func (e *Engine) backupPart(ctx context.Context, d *clouddb.Database, in clouddb.Instance, shard int, dest, name string) (string, error) {
	pr, pw := io.Pipe()
	go func() {
		// This goroutine has no caller to recover a panic: it ends the backup instead.
		defer func() {
			if p := clouddb.Recovered(recover()); p != nil {
				e.Logger.Error("snapshot panicked", "database_id", d.ID, "panic", p.Value, "stack", string(p.Stack))
				pw.CloseWithError(p)
			}
		}()
		_, err := e.Driver.Snapshot(ctx, in, shard, pw)
		pw.CloseWithError(err)
	}()
	loc, err := blob.Put(ctx, dest, name, pr, e.Blob)
	pr.CloseWithError(err) // stops the snapshot if the upload failed first
	return loc, err
}

func importDatabase(ctx context.Context, e *Engine, t *clouddb.Task) (*outcome, error) {
	var req clouddb.ImportRequest
	if err := decode(t, &req); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var src *clouddb.RedisEndpoint
	if req.SourceType == "redis" {
		err := e.Store.View(ctx, func(tx clouddb.Tx) error {
			eps, err := clouddb.ResolveSources(ctx, tx, t.AccountID, req.ImportFromURI)
			if err == nil {
				src = &eps[0]
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	} else {
		for i, u := range req.ImportFromURI {
			if err := blob.CheckType(req.SourceType, u); err != nil {
				return nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "import: importFromUri[%d]: %v", i, err)
			}
		}
	}
	d, err := e.dataTarget(ctx, t)
	if err != nil {
		return nil, err
	}
	if err = e.markStarted(ctx, d.ID, false, clouddb.OperationImporting); err != nil {
		return nil, err
	}
	in := clouddb.InstanceOf(d)
	if src != nil {
		err = e.Driver.CopyFrom(ctx, in, *src)
	} else {
		err = e.loadURIs(ctx, in, req.ImportFromURI)
	}
	if dt := dataTimeout(ctx); err != nil && dt != nil {
		err = fmt.Errorf("the import %w", dt)
	}
	op := &clouddb.OperationStatus{Status: clouddb.OperationSuccess, Time: e.Now()}
	out := &outcome{resourceID: d.ID}
	if err != nil {
		reason := failureReason(err)
		op = &clouddb.OperationStatus{Status: clouddb.OperationFailed, Time: e.Now(), FailureReason: reason}
		out.err = clouddb.Errorf(http.StatusBadRequest, "DATABASE_IMPORT_FAILED", "import into database %d failed (%s): %s", d.ID, reason, err)
	}
	out.record = func(ctx context.Context, tx clouddb.Tx) error {
		text := fmt.Sprintf("Data imported into database %q (id %d) from %d source(s)", d.Spec.Name, d.ID, len(req.ImportFromURI))
		if op.Status == clouddb.OperationFailed {
			text = fmt.Sprintf("Import into database %q (id %d) failed: %s", d.Spec.Name, d.ID, op.FailureReason)
		}
		if err := e.logEvent(ctx, tx, t, d, text); err != nil {
			return err
		}
		return setOperation(ctx, tx, d.ID, false, op)
	}
	out.resource = importStatusView{Status: op.Status, LastImportTime: rfc3339(op), FailureReason: op.FailureReason}
	return out, nil
}

// loadURIs downloads every part and loads them together. A file far larger than the
// memory limit is refused before it is all downloaded: an RDB file is smaller than the
// memory its data takes.
func (e *Engine) loadURIs(ctx context.Context, in clouddb.Instance, uris []string) error {
	limit := max(2*in.MaxMemoryBytes, 64<<20)
	if sl, ok := e.Driver.(clouddb.StreamLoader); ok && len(uris) == 1 {
		// One file is loaded as it downloads.
		rc, _, err := blob.Open(ctx, uris[0], e.Blob)
		if err != nil {
			return err
		}
		defer rc.Close()
		return sl.LoadStream(ctx, in, newSizeLimit(rc, limit, 0))
	}
	dir, err := os.MkdirTemp(e.TempDir, "import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var files []string
	for i, u := range uris {
		rc, _, err := blob.Open(ctx, u, e.Blob)
		if err != nil {
			return err
		}
		path := dir + "/part-" + strconv.Itoa(i) + ".rdb"
		f, err := os.Create(path)
		if err != nil {
			rc.Close()
			return err
		}
		_, err = io.Copy(f, newSizeLimit(rc, limit, i))
		rc.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		files = append(files, path)
	}
	return e.Driver.Load(ctx, in, files)
}

// sizeLimit reads part number part of an import until more than limit bytes came, then
// fails with ErrDataTooLarge.
type sizeLimit struct {
	r           io.Reader
	left, limit int64
	part        int
}

func newSizeLimit(r io.Reader, limit int64, part int) *sizeLimit {
	return &sizeLimit{r: r, left: limit, limit: limit, part: part}
}

func (s *sizeLimit) Read(p []byte) (int, error) {
	if s.left < 0 {
		return 0, s.tooLarge()
	}
	if int64(len(p)) > s.left+1 {
		p = p[:s.left+1]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	if s.left < 0 {
		return n, s.tooLarge()
	}
	return n, err
}

func (s *sizeLimit) tooLarge() error {
	return fmt.Errorf("%w: importFromUri[%d] is larger than %d bytes", clouddb.ErrDataTooLarge, s.part, s.limit)
}

// failureReason names why a backup or an import failed, as the status resources report
// it.
func failureReason(err error) string {
	var dt *DataTimeoutError
	switch {
	case errors.As(err, &dt):
		return "timeout"
	case errors.Is(err, clouddb.ErrDataCorrupt):
		return "file-corrupted"
	case errors.Is(err, clouddb.ErrDataTooLarge):
		return "data-too-large"
	case errors.Is(err, blob.ErrNotFound):
		return "file-not-found"
	case errors.Is(err, blob.ErrAuth), errors.Is(err, redisdata.ErrAuth):
		return "authentication-failed"
	case errors.Is(err, blob.ErrForbiddenAddress):
		return "forbidden-address"
	case errors.Is(err, blob.ErrUnsupported), errors.Is(err, blob.ErrInvalid):
		return "unsupported-source"
	case errors.Is(err, blob.ErrUnreachable):
		return "source-unreachable"
	}
	var ne net.Error
	var op *net.OpError
	if errors.As(err, &ne) || errors.As(err, &op) {
		return "source-unreachable"
	}
	return "unknown-error"
}
