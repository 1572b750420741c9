package task

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// settledVersion: what a database stores once its stored version is made the one that
// serves its data.
func TestSettledVersion(t *testing.T) {
	versions := clouddb.RedisVersions{Default: "7.2", Offered: []string{"7.0", "7.2", "7.4"}}
	upgrading := &clouddb.UpgradeState{From: "7.0", Target: "7.4", Status: clouddb.UpgradeInProgress}
	for _, c := range []struct {
		stored, served string
		upgrade        *clouddb.UpgradeState
		want           string
	}{
		{"7.0", "7.0", nil, "7.0"},
		{"7.4", "", nil, "7.4"},          // never ran: as stored, an offered version
		{"latest", "", nil, "7.2"},       // never ran: the default for free text
		{"", "", nil, "7.2"},             // the same for none
		{"", "7.0", nil, "7.0"},          // what served it, not the default
		{"latest", "7.0", nil, "7.0"},    // free text
		{"7.4", "7.0", nil, "7.0"},       // an offered version no upgrade asked for
		{"7.4", "7.0", upgrading, "7.4"}, // an upgrade not carried out yet
		{"7.0", "7.2", nil, "7.2"},       // older than what served it
		{"6.0.5", "6.2", nil, "7.0"},     // served by a version no longer offered: the next one up
		{"7.0", "8.0", nil, "8.0"},       // or none: named, so that the error names it
	} {
		d := &clouddb.Database{Spec: clouddb.DatabaseSpec{RedisVersion: c.stored}, State: clouddb.DatabaseState{Upgrade: c.upgrade}}
		require.Equal(t, c.want, settledVersion(versions, d, c.served), "stored %q, served %q", c.stored, c.served)
	}
}

// TestUpgradeOutcomesKeptUnderSavepoint: a savepoint taken in a transaction of the store
// RecordUpgradeOutcomes returns still records outcomes (it hands on the recording
// transaction, not the bare one the embedded Tx would).
func TestUpgradeOutcomesKeptUnderSavepoint(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	var inner clouddb.Tx
	require.NoError(t, RecordUpgradeOutcomes(db).Update(t.Context(), func(tx clouddb.Tx) error {
		return tx.Savepoint(t.Context(), func(in clouddb.Tx) error {
			inner = in
			return nil
		})
	}))
	require.IsType(t, upgradeTx{}, inner)
}
