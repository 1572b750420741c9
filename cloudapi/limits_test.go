package cloudapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
)

// PUT …/tags takes at most 64 tags, keys of at most 128 characters and values of at most
// 256, without control or bidi characters: past a limit the answer is a 400 naming the
// field and the rule, and the tags stay as they were.
func TestTagLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID, dbID := e.activeSubscription("tags")
	path := fmt.Sprintf("/v1/subscriptions/%d/databases/%d/tags", subID, dbID)
	put := func(tags []clouddb.Tag) response {
		b, err := json.Marshal(map[string]any{"tags": tags})
		require.NoError(t, err)
		return e.do(http.MethodPut, path, mainKey, mainSecret, b)
	}
	n := func(count int) []clouddb.Tag {
		out := make([]clouddb.Tag, count)
		for i := range out {
			out[i] = clouddb.Tag{Key: fmt.Sprintf("k%d", i), Value: "v"}
		}
		return out
	}
	r := put(n(64))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	cases := []struct {
		tags []clouddb.Tag
		want string
	}{
		{n(65), "database: tags may hold at most 64 elements, got 65"},
		{[]clouddb.Tag{{Key: strings.Repeat("é", 129), Value: "v"}}, "database: tags[0].key must be at most 128 characters, got 129"},
		{[]clouddb.Tag{{Key: "k", Value: strings.Repeat("é", 257)}}, "database: tags[0].value must be at most 256 characters, got 257"},
		{[]clouddb.Tag{{Key: "admin\u202e", Value: "v"}}, "database: tags[0].key must not contain control, bidi or invisible format characters (U+202E at character 6)"},
		{[]clouddb.Tag{{Key: "k", Value: "a\x00b"}}, "database: tags[0].value must not contain control, bidi or invisible format characters (U+0000 at character 2)"},
	}
	for _, c := range cases {
		e := requireError(t, put(c.tags), http.StatusBadRequest, "INVALID_FIELD")
		require.Equal(t, c.want, e.Error.Description)
	}
	require.Equal(t, http.StatusOK, put([]clouddb.Tag{{Key: strings.Repeat("é", 128), Value: strings.Repeat("é", 256)}}).status,
		"lengths count characters, not bytes")
	got, err := e.main.GetDatabaseTags(testCtx(t), subID, dbID)
	require.NoError(t, err)
	require.Len(t, got, 1)
}

// A subscription name may have 40 characters of any script, and none that is a control
// or a bidi character: such a create fails its task with a 400 naming the field.
func TestSubscriptionNameCharacters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	_, err := e.main.Wait(ctx)(e.main.CreateSubscription(ctx, e.subscriptionBody(strings.Repeat("é", 40), e.mainPM, 1, 0.1)))
	require.NoError(t, err, "40 two-byte characters are 40 characters")
	tk, err := e.main.CreateSubscription(ctx, e.subscriptionBody("prod\u202eved", e.mainPM, 1, 0.1))
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
		Description: "subscription: name must not contain control, bidi or invisible format characters (U+202E at character 5)"})
	body := e.subscriptionBody("ok", e.mainPM, 1, 0.1)
	body.CloudProviders[0].Regions[0].Region = client.Ptr("us-east-1\x00")
	tk, err = e.main.CreateSubscription(ctx, body)
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
		Description: "subscription: cloudProviders[0].regions[0].region must not contain control, bidi or invisible format characters (U+0000 at character 10)"})
}
