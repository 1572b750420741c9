package sqlite_test

import (
	"path/filepath"
	"testing"

	"clouddb"
	"clouddb/storetest"
)

func TestStatusCounter(t *testing.T) {
	storetest.RunStatusCounter(t, func(t *testing.T) clouddb.Store {
		return mustOpen(t, filepath.Join(t.TempDir(), "clouddb.db"))
	})
}
