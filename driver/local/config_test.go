package local

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigRoundTrip(t *testing.T) {
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	for _, password := range []string{
		"plain", `a"b\nrename-command`, "x\ny", `'`, `\x41`, all.String(),
	} {
		for name := range persistences {
			want := serverConfig{
				Port: 6380, Host: "127.0.0.1", Password: password, MaxMemory: 1 << 30,
				Policy: "allkeys-lru", Persistence: name,
			}
			data, err := want.render(7, "/data dir/7")
			require.NoError(t, err)
			for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
				if strings.HasPrefix(line, "requirepass ") {
					args, err := splitArgs(line)
					require.NoError(t, err)
					require.Equal(t, []string{"requirepass", password}, args)
				}
			}
			got, err := parseConfig(data)
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
	}
}

func TestSplitArgs(t *testing.T) {
	for line, want := range map[string][]string{
		`save ""`:                 {"save", ""},
		`save 3600 1`:             {"save", "3600", "1"},
		`a "b c" 'd\'e' "\x41\n"`: {"a", "b c", "d'e", "A\n"},
	} {
		got, err := splitArgs(line)
		require.NoError(t, err)
		require.Equal(t, want, got, line)
	}
	for _, bad := range []string{`a "b`, `a 'b`, `a "b"c`} {
		_, err := splitArgs(bad)
		require.Error(t, err, bad)
	}
}
