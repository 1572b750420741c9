package clouddb_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestACLRuleRefusal: a refusal reads back as the rule and reason it was made of, rule
// texts with quotes and colons included; other errors do not.
func TestACLRuleRefusal(t *testing.T) {
	for _, rule := range []string{"+@read +foo ~*", `+get ~"a": ~b\`, "bad", ""} {
		reason := `Redis refuses "+foo": Unknown command or category name in ACL`
		err := clouddb.ACLRuleRefused(rule, reason)
		require.Equal(t, fmt.Sprintf("Invalid ACL redis rule %q: %s", rule, reason), err.Description)
		require.Equal(t, clouddb.ErrTypeACLRulePatternInvalid, err.Type)
		require.Equal(t, "redis-acl-wrong-acl-rule-pattern", err.AdditionalInfo)
		got, why, ok := clouddb.ACLRuleRefusal(fmt.Errorf("wrapped: %w", err))
		require.True(t, ok, rule)
		require.Equal(t, rule, got)
		require.Equal(t, reason, why)
	}
	text, why, ok := clouddb.ACLRuleRefusal(clouddb.ACLRuleSyntaxRefused("on >pw"))
	require.True(t, ok)
	require.Equal(t, "on >pw", text)
	require.Equal(t, "commands must start with a + or - sign, categories must start with +@ or -@ characters and keys must start with the ~ symbol", why)
	for _, err := range []error{nil, errors.New("Invalid ACL redis rule \"x\": y"), clouddb.ValidateACLRule("on"),
		clouddb.Invalid(clouddb.ErrTypeInvalidField, "Invalid ACL redis rule \"x\": y")} {
		_, _, ok := clouddb.ACLRuleRefusal(err)
		require.False(t, ok, "%v", err)
	}
}
