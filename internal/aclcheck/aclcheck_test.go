package aclcheck

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestCache: the memory of verdicts is bounded and forgets the least recently used
// first, not everything at once.
func TestCache(t *testing.T) {
	c := NewCache(3)
	refused := Verdict{Refused: true, Word: "+x", Reason: "Unknown"}
	c.Put("a", Verdict{})
	c.Put("b", refused)
	c.Put("c", Verdict{})
	_, ok := c.Get("a") // a is now the most recently used
	require.True(t, ok)
	c.Put("d", Verdict{})
	require.Equal(t, 3, c.Len())
	_, ok = c.Get("b")
	require.False(t, ok, "the least recently used goes")
	for _, k := range []string{"a", "c", "d"} {
		_, ok = c.Get(k)
		require.True(t, ok, k)
	}
	c.Put("c", refused) // an update is no new entry
	v, _ := c.Get("c")
	require.Equal(t, refused, v)
	require.Equal(t, 3, c.Len())

	require.Equal(t, 4096, MaxVerdicts)
	big := NewCache(MaxVerdicts)
	for i := range MaxVerdicts + 10 {
		big.Put(fmt.Sprint(i), Verdict{})
	}
	require.Equal(t, MaxVerdicts, big.Len(), "bounded")
	_, ok = big.Get(fmt.Sprint(MaxVerdicts + 9))
	require.True(t, ok, "the newest stay")
	_, ok = big.Get("9")
	require.False(t, ok, "the oldest went")
}

// TestChecker: each distinct server is asked once per batch, oldest version first, only
// about the rules it has no verdict for; the first rule refused in the order given is the
// API's refusal, naming the version when several are offered; an error of Run is no
// refusal.
func TestChecker(t *testing.T) {
	var asked []string
	refuse := map[string]string{"new": "+hexpire"} // server "new" refuses rules with this word
	failing := errors.New("no server")
	var fail bool
	c := &Checker{
		Versions: map[string]string{"7.2": "new", "7.0": "old", "6.2": "old"},
		Key:      func(s string) (string, bool) { return s + "\x00", true },
		Verdicts: NewCache(MaxVerdicts),
		Run: func(_ context.Context, s string, rules []string) (map[string]Verdict, error) {
			if fail {
				return nil, failing
			}
			asked = append(asked, fmt.Sprintf("%s %v", s, rules))
			out := map[string]Verdict{}
			for _, r := range rules {
				if w := refuse[s]; w != "" && r == w+" ~*" {
					out[r] = Verdict{Refused: true, Word: w, Reason: "Unknown command or category name in ACL"}
				} else {
					out[r] = Verdict{}
				}
			}
			return out, nil
		},
	}
	require.Equal(t, []string{"old", "new"}, Servers(c.Versions))
	ctx := t.Context()
	require.NoError(t, c.Check(ctx, []string{"+get ~*", "+get ~*", "+@read ~*"}))
	require.Equal(t, []string{"old [+get ~* +@read ~*]", "new [+get ~* +@read ~*]"}, asked)

	asked = nil
	err := c.Check(ctx, []string{"+get ~*", "+hexpire ~*", "+set ~*"})
	require.Equal(t, []string{"old [+hexpire ~* +set ~*]", "new [+hexpire ~* +set ~*]"}, asked, "verdicts remembered")
	text, reason, ok := clouddb.ACLRuleRefusal(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "+hexpire ~*", text)
	require.Equal(t, `Redis 7.2 refuses "+hexpire": Unknown command or category name in ACL`, reason)

	fail = true
	require.NoError(t, c.Check(ctx, []string{"+set ~*", "+get ~*"}), "all remembered: no server asked")
	err = c.Check(ctx, []string{"+del ~*"})
	require.ErrorIs(t, err, failing)
	_, _, ok = clouddb.ACLRuleRefusal(err)
	require.False(t, ok, "a check not made is no refusal")

	text, reason, ok = clouddb.ACLRuleRefusal(c.Check(ctx, []string{"+get ~*", "on >pw +@all"}))
	require.True(t, ok)
	require.Equal(t, "on >pw +@all", text, "refused by its syntax, no server asked")
	require.Contains(t, reason, "commands must start with a + or - sign")

	one := &Checker{Versions: map[string]string{"7.2": "new"}, Key: c.Key, Verdicts: c.Verdicts, Run: c.Run}
	_, reason, _ = clouddb.ACLRuleRefusal(one.Check(ctx, []string{"+hexpire ~*"}))
	require.Equal(t, `Redis refuses "+hexpire": Unknown command or category name in ACL`, reason, "one version: none named")
}
