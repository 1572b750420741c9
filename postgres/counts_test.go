package postgres_test

import (
	"testing"

	"clouddb"
	"clouddb/internal/pgtest"
	"clouddb/storetest"
)

func TestStatusCounter(t *testing.T) {
	storetest.RunStatusCounter(t, func(t *testing.T) clouddb.Store {
		return mustOpen(t, pgtest.URL(t))
	})
}
