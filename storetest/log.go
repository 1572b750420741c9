package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func testLog(t *testing.T, open OpenFunc) {
	t.Run("List", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		var a []*clouddb.LogEntry
		for i, res := range []int{1, 2, 1, 2, 1} {
			a = append(a, &clouddb.LogEntry{
				AccountID:   bn.a.ID,
				Originator:  "ci",
				APIKeyName:  "key",
				Resource:    "database",
				ResourceID:  res,
				Type:        clouddb.LogTypeDatabase,
				Description: "change " + string(rune('a'+i)),
			})
		}
		a[1].Time = base // a preset time is kept
		b := &clouddb.LogEntry{AccountID: bn.b.ID, ResourceID: 1, Type: clouddb.LogTypeAccount, Description: "b"}
		bn.update(t, func(tx clouddb.Tx) error {
			for _, e := range append(a, b) {
				require.NoError(t, tx.CreateLogEntry(bn.ctx, e))
				require.NotZero(t, e.ID)
			}
			return nil
		})
		requireStamped(t, a[0].Time)
		require.Equal(t, base, a[1].Time)

		list := func(f clouddb.LogFilter) []*clouddb.LogEntry {
			var out []*clouddb.LogEntry
			bn.view(t, func(tx clouddb.Tx) error {
				var err error
				out, err = tx.LogEntries(bn.ctx, f)
				return err
			})
			return out
		}
		// Newest first, whatever their times.
		require.Equal(t, []*clouddb.LogEntry{a[4], a[3], a[2], a[1], a[0]}, list(clouddb.LogFilter{AccountID: bn.a.ID}))
		require.Equal(t, []*clouddb.LogEntry{a[3], a[2]}, list(clouddb.LogFilter{AccountID: bn.a.ID, Offset: 1, Limit: 2}))
		require.Equal(t, []*clouddb.LogEntry{a[3], a[1]}, list(clouddb.LogFilter{AccountID: bn.a.ID, ResourceID: 2}))
		require.Equal(t, []*clouddb.LogEntry{a[1]}, list(clouddb.LogFilter{AccountID: bn.a.ID, ResourceID: 2, Offset: 1}))
		require.Empty(t, list(clouddb.LogFilter{AccountID: bn.a.ID, Offset: 5}))
		require.Equal(t, []*clouddb.LogEntry{b}, list(clouddb.LogFilter{AccountID: bn.b.ID}))
		require.Equal(t, []*clouddb.LogEntry{b, a[4], a[3], a[2], a[1], a[0]}, list(clouddb.LogFilter{}))
	})

	t.Run("DefaultLimit", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		var last *clouddb.LogEntry
		bn.update(t, func(tx clouddb.Tx) error {
			for range 101 {
				last = &clouddb.LogEntry{AccountID: bn.a.ID, Description: "x"}
				require.NoError(t, tx.CreateLogEntry(bn.ctx, last))
			}
			return nil
		})
		got := func(f clouddb.LogFilter) []*clouddb.LogEntry {
			var out []*clouddb.LogEntry
			bn.view(t, func(tx clouddb.Tx) error {
				var err error
				out, err = tx.LogEntries(bn.ctx, f)
				return err
			})
			return out
		}
		entries := got(clouddb.LogFilter{AccountID: bn.a.ID})
		require.Len(t, entries, 100, "Limit 0 means 100")
		require.Equal(t, last, entries[0])
		require.Len(t, got(clouddb.LogFilter{AccountID: bn.a.ID, Limit: 101}), 101)
	})
}
