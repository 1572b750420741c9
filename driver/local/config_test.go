package local

import (
	"slices"
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
				require.False(t, strings.HasPrefix(line, "requirepass"), line)
				if strings.HasPrefix(line, `user "default" `) {
					args, splitErr := splitArgs(line)
					require.NoError(t, splitErr)
					require.Equal(t, append([]string{"user", "default"}, defaultUserRules(">"+password, false)...), args)
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

// renderedDirectives are the directive names of a rendered config, in order: whatever the
// values, a file has exactly these (a user line for clouddb's own user when it has one).
func renderedDirectives(internal bool) []string {
	names := []string{"daemonize", "supervised", "port", "bind", "protected-mode", "user"}
	if internal {
		names = append(names, "user")
	}
	return append(names, "maxmemory", "maxmemory-policy",
		"sanitize-dump-payload", "maxmemory-clients", "client-output-buffer-limit", "client-query-buffer-limit",
		"appendonly", "appendfsync", "save",
		"dir", "dbfilename", "appenddirname", "pidfile", "logfile", "repl-diskless-sync-delay")
}

// FuzzConfigRoundTrip: for any password, host, internal secret and directory, the rendered
// redis.conf reads back as it was written, has exactly the expected directives, and its
// user lines hold exactly the expected rules (no value breaks out of its argument).
func FuzzConfigRoundTrip(f *testing.F) {
	f.Add("plain", "127.0.0.1", "secret", "/data/7", int64(1<<30), false, uint8(0))
	f.Add("a\"b\\nrename-command", "::1", "", "/data dir/7", int64(0), true, uint8(3))
	f.Add("x\ny\r\nsave 1 1", "0.0.0.0\nbind 1.2.3.4", "s\x00\"'", "/d\n#", int64(-1), false, uint8(5))
	f.Add(" ~* +@all", "h\" \"x", ">other", "'", int64(1), true, uint8(1))
	f.Add("\\x22 \\x0a", "\t", "#ab", "\\", int64(99), false, uint8(2))
	names := make([]string, 0, len(persistences))
	for name := range persistences {
		names = append(names, name)
	}
	slices.Sort(names)
	f.Fuzz(func(t *testing.T, password, host, secret, dir string, maxMemory int64, readOnly bool, p uint8) {
		want := serverConfig{
			Port: 6380, Host: host, Password: password, MaxMemory: maxMemory,
			Policy: "allkeys-lru", Persistence: names[int(p)%len(names)], ReadOnly: readOnly,
			InternalSecret: secret,
		}
		data, err := want.render(7, dir)
		require.NoError(t, err)
		got, err := parseConfig(data)
		require.NoError(t, err)
		require.Equal(t, want, got)

		var directives []string
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		for _, line := range lines {
			if strings.HasPrefix(line, "#") {
				require.NotContains(t, line, "\r")
				continue
			}
			args, err := splitArgs(line)
			require.NoError(t, err, line)
			directives = append(directives, args[0])
			if args[0] != "user" {
				continue
			}
			switch args[1] {
			case "default":
				require.Equal(t, defaultUserRules(">"+password, readOnly), args[2:])
			case internalUser:
				require.Equal(t, internalUserRules(">"+secret), args[2:])
			default:
				t.Fatalf("unexpected user %q", args[1])
			}
		}
		require.Equal(t, renderedDirectives(secret != ""), directives)
	})
}

// FuzzACLRules: the rules of the default user carry the password in exactly one argument,
// its password rule, and otherwise only clouddb's fixed rules; live, the password is sent
// as its hash, which no password can shape.
func FuzzACLRules(f *testing.F) {
	f.Add("plain", false)
	f.Add("p nocommands", true)
	f.Add(">x +@all", false)
	f.Add("\x00\n\r", true)
	f.Add("", false)
	fixed := append([]string{"reset", "on", "~*", "&*", readOnlyRule}, tenantRules...)
	f.Fuzz(func(t *testing.T, password string, readOnly bool) {
		for _, pass := range []string{">" + password, "#" + passwordHash(password)} {
			rules := defaultUserRules(pass, readOnly)
			require.Equal(t, pass, rules[2], "the password rule")
			for i, r := range rules {
				if i != 2 {
					require.Contains(t, fixed, r)
				}
			}
			require.Equal(t, readOnly, slices.Contains(rules, readOnlyRule))
			require.Equal(t, len(tenantRules)+5+map[bool]int{true: 1}[readOnly], len(rules))
		}
		hash := passwordHash(password)
		require.Len(t, hash, 64)
		require.Equal(t, strings.Trim(hash, "0123456789abcdef"), "")
		rules := internalUserRules("#" + hash)
		require.Equal(t, []string{"reset", "on", "#" + hash, "~*", "&*", "+@all"}, rules)
	})
}
