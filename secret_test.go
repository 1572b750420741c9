package clouddb_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func TestCipher(t *testing.T) {
	key, err := clouddb.ParseKey(clouddb.NewKey())
	require.NoError(t, err)
	c, err := clouddb.NewCipher(key)
	require.NoError(t, err)

	sealed := c.Seal("hunter2")
	require.NotContains(t, sealed, "hunter2")
	require.NotEqual(t, sealed, c.Seal("hunter2"), "a fresh nonce per value")
	plain, err := c.Open(sealed)
	require.NoError(t, err)
	require.Equal(t, "hunter2", plain)

	require.Empty(t, c.Seal(""))
	plain, err = c.Open("written-before-encryption")
	require.NoError(t, err)
	require.Equal(t, "written-before-encryption", plain)

	other, err := clouddb.NewCipher([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	_, err = other.Open(sealed)
	require.ErrorIs(t, err, clouddb.ErrSealed, "a wrong key is detected")
	_, err = c.Open(sealed[:len(sealed)-4] + "AAAA")
	require.ErrorIs(t, err, clouddb.ErrSealed, "tampering is detected")

	for _, bad := range []string{"", "short", strings.Repeat("z", 64)} {
		_, err = clouddb.ParseKey(bad)
		require.Error(t, err, bad)
	}
	hexKey := strings.Repeat("ab", 32)
	k, err := clouddb.ParseKey(hexKey)
	require.NoError(t, err)
	require.Len(t, k, 32)
}
