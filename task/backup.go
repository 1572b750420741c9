package task

import (
	"context"
	"net/http"
	"strings"

	"clouddb"
	"clouddb/blob"
)

// The status tasks answer GET …/backup and GET …/import: they report the database's latest
// backup or import as the task's response.resource.

// backupStatusView is the resource of a backup status task.
type backupStatusView struct {
	Status         string `json:"status"`
	LastBackupTime string `json:"lastBackupTime,omitempty"`
	FailureReason  string `json:"failureReason,omitempty"`
	Location       string `json:"location,omitempty"`
}

// importStatusView is the resource of an import status task.
type importStatusView struct {
	Status              string        `json:"status"`
	LastImportTime      string        `json:"lastImportTime,omitempty"`
	FailureReason       string        `json:"failureReason,omitempty"`
	FailureReasonParams []clouddb.Tag `json:"failureReasonParams,omitempty"`
}

// statusNone is what a status task reports before the first backup or import.
const statusNone = "none"

func rfc3339(op *clouddb.OperationStatus) string {
	if op == nil || op.Time.IsZero() {
		return ""
	}
	return op.Time.UTC().Format("2006-01-02T15:04:05Z")
}

func backupStatus(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	d, err := findDatabase(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	if backupDestination(&d.Spec) == "" {
		return 0, errBackupDisabled(d)
	}
	view := backupStatusView{Status: statusNone}
	if b := d.State.Backup; b != nil {
		view = backupStatusView{Status: b.Status, LastBackupTime: rfc3339(b), FailureReason: b.FailureReason, Location: b.Location}
	}
	v.resource = view
	return d.ID, nil
}

func importStatus(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
	d, err := findDatabase(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	view := importStatusView{Status: statusNone}
	if i := d.State.Import; i != nil {
		view = importStatusView{Status: i.Status, LastImportTime: rfc3339(i), FailureReason: i.FailureReason, FailureReasonParams: i.FailureReasonParams}
	}
	v.resource = view
	return d.ID, nil
}

// backupDestination is where a database's backups go: remoteBackup.storagePath when
// remote backup is active, else periodicBackupPath; empty when backups are disabled.
func backupDestination(s *clouddb.DatabaseSpec) string {
	if b := s.RemoteBackup; b != nil && b.Active && b.StoragePath != "" {
		return b.StoragePath
	}
	return s.PeriodicBackupPath
}

// checkBackupDestinations refuses a backup path that no backup could be written to (an
// unsupported scheme or storage type, a relative path, a local directory outside those
// backups may go to), so that the mistake shows when the path is set rather than as
// failed backups later.
func checkBackupDestinations(s *clouddb.DatabaseSpec, opts blob.Options) error {
	check := func(typ, uri string) error {
		if err := blob.CheckType(typ, uri); err != nil {
			return err
		}
		return blob.CheckLocal(uri, opts)
	}
	if p := s.PeriodicBackupPath; p != "" {
		if err := check("", p); err != nil {
			return clouddb.Invalid(clouddb.ErrTypeInvalidField, "database: periodicBackupPath: %s", blobError(err))
		}
	}
	if b := s.RemoteBackup; b != nil && b.Active && b.StoragePath != "" {
		if err := check(b.StorageType, b.StoragePath); err != nil {
			return clouddb.Invalid(clouddb.ErrTypeInvalidField, "database: remoteBackup.storagePath: %s", blobError(err))
		}
	}
	return nil
}

// blobError is the text of a blob error without its package prefix.
func blobError(err error) string { return strings.TrimPrefix(err.Error(), "blob: ") }

func errBackupDisabled(d *clouddb.Database) error {
	return clouddb.Errorf(http.StatusBadRequest, clouddb.ErrTypeDatabaseBackup,
		"database %d has no backup destination: set periodicBackupPath or remoteBackup.storagePath first", d.ID)
}
