package clouddb

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The version arithmetic behind redisVersion and upgrades: major.minor parsed and ordered
// numerically, creates and upgrades checked against what is offered.
func TestRedisVersions(t *testing.T) {
	for in, want := range map[string]string{"7.0": "7.0", "7.0.15": "7.0", "7.10.1": "7.10"} {
		got, ok := MajorMinor(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "7", "latest", "07.0", "7.x", "seven.two"} {
		_, ok := MajorMinor(in)
		require.False(t, ok, in)
	}
	require.Negative(t, CompareRedisVersions("7.2", "7.10"), "numeric, not text")
	require.Positive(t, CompareRedisVersions("8.0", "7.4"))
	require.Zero(t, CompareRedisVersions("7.2", "7.2"))

	r := RedisVersions{Default: "7.2", Offered: []string{"7.0", "7.2", "7.10"}}
	require.Equal(t, "7.10", r.Latest())
	require.Equal(t, []string{"7.2", "7.10"}, r.Newer("7.0"))
	require.Empty(t, r.Newer("7.10"))
	require.Equal(t, "7.2", r.Keep("7.2"), "an offered version is kept")
	require.Equal(t, "7.2", r.Keep("7.1"), "a version no longer offered moves to the next newer one")
	require.Equal(t, "9.0", r.Keep("9.0"), "nothing newer: what served the data")

	v, err := r.DatabaseVersion("")
	require.NoError(t, err)
	require.Equal(t, "7.2", v)
	v, err = r.DatabaseVersion("7.10")
	require.NoError(t, err)
	require.Equal(t, "7.10", v)
	_, err = r.DatabaseVersion("7.4")
	require.Equal(t, ErrTypeRedisVersionNotSupported, AsError(err).Type)
	_, err = r.DatabaseVersion("7.2.4")
	require.Equal(t, ErrTypeRedisVersionInvalid, AsError(err).Type)
	v, err = r.SubscriptionVersion(LatestRedisVersion)
	require.NoError(t, err)
	require.Equal(t, "7.10", v)
	_, err = r.SubscriptionVersion("6.2")
	require.Equal(t, ErrTypeSubscriptionRedisVersionInvalid, AsError(err).Type)

	require.NoError(t, r.CheckUpgrade("7.0", "7.10"))
	for _, target := range []string{"", "7.0", "7.4", "6.2"} {
		err = r.CheckUpgrade("7.0", target)
		require.Equal(t, ErrTypeDatabaseUpgradeInvalidRedisVersion, AsError(err).Type, target)
	}
	require.ErrorContains(t, r.CheckUpgrade("7.2", "7.0"), "no downgrade")
}

// NewRedisVersions: one version per full version given, the first the default, offered
// oldest first (numerically), each reporting its full version; duplicates and non-versions
// refused.
func TestNewRedisVersions(t *testing.T) {
	r, err := NewRedisVersions("7.10.1", "7.2.4", "8.0")
	require.NoError(t, err)
	require.Equal(t, RedisVersions{Default: "7.10", Offered: []string{"7.2", "7.10", "8.0"},
		Full: map[string]string{"7.2": "7.2.4", "7.10": "7.10.1", "8.0": "8.0"}}, r)
	require.Equal(t, "7.2.4", r.Compliance("7.2"))
	require.Equal(t, "8.0", r.Latest())

	one, err := NewRedisVersions("7.0.15")
	require.NoError(t, err)
	require.Equal(t, OneRedisVersion("7.0.15"), one, "the same as OneRedisVersion for one")

	_, err = NewRedisVersions("7.2.4", "7.0.15", "7.2.5")
	require.EqualError(t, err, "redis versions: 7.2.4 and 7.2.5 are both Redis 7.2: give one per major.minor")
	_, err = NewRedisVersions("7.2.4", "latest")
	require.ErrorContains(t, err, `"latest" is not a Redis version`)
	_, err = NewRedisVersions()
	require.Error(t, err)
}
