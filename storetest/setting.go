package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// testSetting: a setting reads back as written, a second write replaces it, and an unset
// one is ErrNotFound.
func testSetting(t *testing.T, open OpenFunc) {
	t.Parallel()
	bn := setup(t, open)
	bn.view(t, func(tx clouddb.Tx) error {
		_, err := tx.Setting(bn.ctx, "missing")
		require.ErrorIs(t, err, clouddb.ErrNotFound)
		return nil
	})
	bn.update(t, func(tx clouddb.Tx) error { return tx.PutSetting(bn.ctx, "a", "one") })
	bn.update(t, func(tx clouddb.Tx) error { return tx.PutSetting(bn.ctx, "b", "two") })
	bn.update(t, func(tx clouddb.Tx) error { return tx.PutSetting(bn.ctx, "a", "three") })
	bn.view(t, func(tx clouddb.Tx) error {
		for name, want := range map[string]string{"a": "three", "b": "two"} {
			got, err := tx.Setting(bn.ctx, name)
			require.NoError(t, err)
			require.Equal(t, want, got, name)
		}
		return nil
	})
}
