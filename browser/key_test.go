package browser_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// scanAll lists every key of a connection page by page and returns them by name; it
// checks that no key comes twice.
func scanAll(t *testing.T, b *testBundle, dbID int, query string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	cursor := "0"
	for page := 0; ; page++ {
		require.Less(t, page, 1000, "the listing does not end")
		res := b.get(t, fmt.Sprintf("/api/db/%d/keys?cursor=%s&%s", dbID, url.QueryEscape(cursor), query))
		requireStatus(t, res, http.StatusOK)
		for _, k := range res.body["keys"].([]any) {
			key := k.(map[string]any)
			name := keyName(t, key["name"])
			require.NotContains(t, out, name, "key %q listed twice", name)
			out[name] = key
		}
		cursor = res.body["cursor"].(string)
		if cursor == "0" {
			return out
		}
	}
}

// keyName reads a binary-safe string: text, or {"base64": ...}.
func keyName(t *testing.T, v any) string {
	t.Helper()
	switch n := v.(type) {
	case string:
		return n
	case map[string]any:
		raw, err := base64.StdEncoding.DecodeString(n["base64"].(string))
		require.NoError(t, err)
		return string(raw)
	}
	t.Fatalf("unexpected name %v", v)
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// testBrowse fills the database of a registered standalone or sentinel connection
// through rc and reads it back through the API.
func testBrowse(t *testing.T, b *testBundle, dbID int, rc *redis.Client) {
	ctx := context.Background()
	big := strings.Repeat("x", 100<<10)
	require.NoError(t, rc.FlushAll(ctx).Err())
	pipe := rc.Pipeline()
	pipe.Set(ctx, "str", "hello", 0)
	pipe.Set(ctx, "big", big, 0)
	pipe.Set(ctx, "ttl", "soon", 1000*time.Second)
	pipe.Set(ctx, "\xffbin", "\x00\xfe", 0)
	pipe.Set(ctx, "a/b/", "slashes", 0)
	pipe.Set(ctx, "a//b", "double", 0)
	pipe.HSet(ctx, "h", "b", "2", "a", "1", "c", "3")
	for i := range 600 { // more than hash-max-listpack-entries, so that HSCAN pages
		pipe.HSet(ctx, "bigh", fmt.Sprintf("f%03d", i), i)
	}
	for i := range 250 {
		pipe.RPush(ctx, "l", fmt.Sprintf("item%03d", i))
	}
	pipe.SAdd(ctx, "s", "c", "a", "b")
	pipe.ZAdd(ctx, "z", redis.Z{Score: 2.5, Member: "b"}, redis.Z{Score: 1, Member: "a"})
	pipe.Do(ctx, "ZADD", "z", "+inf", "c")
	for i := range 3 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "x", ID: fmt.Sprintf("%d-0", i+1), Values: []any{"n", i, "m", "v"}})
	}
	for i := range 30 {
		pipe.Set(ctx, fmt.Sprintf("user:%02d", i), i, 0)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	all := []string{"\xffbin", "a//b", "a/b/", "big", "bigh", "h", "l", "s", "str", "ttl", "x", "z"}
	for i := range 30 {
		all = append(all, fmt.Sprintf("user:%02d", i))
	}
	slices.Sort(all)
	keyPath := func(key string) string { return fmt.Sprintf("/api/db/%d/keys/%s", dbID, url.PathEscape(key)) }

	t.Run("ScanAll", func(t *testing.T) {
		keys := scanAll(t, b, dbID, "count=5")
		require.Equal(t, all, sortedKeys(keys))
		strSize, err := rc.MemoryUsage(ctx, "str").Result()
		require.NoError(t, err)
		require.Equal(t, map[string]any{"name": "str", "type": "string", "ttl": float64(-1),
			"size": float64(strSize), "length": float64(5)}, keys["str"])
		require.Equal(t, "hash", keys["h"]["type"])
		require.Equal(t, "stream", keys["x"]["type"])
		require.Equal(t, "zset", keys["z"]["type"])
		ttl := keys["ttl"]["ttl"].(float64)
		require.True(t, ttl > 900 && ttl <= 1000, "ttl %v", ttl)
		require.Equal(t, map[string]any{"base64": base64.StdEncoding.EncodeToString([]byte("\xffbin"))}, keys["\xffbin"]["name"])

		// One page holds at most what SCAN returned, and says where to go on.
		res := b.get(t, fmt.Sprintf("/api/db/%d/keys/?count=1", dbID))
		requireStatus(t, res, http.StatusOK)
		require.NotEqual(t, "0", res.body["cursor"])
	})

	t.Run("ScanMatchAndType", func(t *testing.T) {
		require.Len(t, scanAll(t, b, dbID, "match=user:*&count=7"), 30)
		require.Equal(t, []string{"bigh", "h"}, sortedKeys(scanAll(t, b, dbID, "type=hash")))
		require.Equal(t, []string{"user:01", "user:10", "user:11", "user:12", "user:13", "user:14", "user:15", "user:16", "user:17", "user:18", "user:19", "user:21"},
			sortedKeys(scanAll(t, b, dbID, "match="+url.QueryEscape("user:*1*"))))
		require.Empty(t, scanAll(t, b, dbID, "match=nothing*"))
	})

	t.Run("ScanErrors", func(t *testing.T) {
		requireError(t, b.get(t, fmt.Sprintf("/api/db/%d/keys?cursor=abc", dbID)), 400, "INVALID_CURSOR", "cursor")
		requireError(t, b.get(t, fmt.Sprintf("/api/db/%d/keys?count=0", dbID)), 400, "INVALID_FIELD", "count", "integer from 1 to 10000")
		requireError(t, b.get(t, fmt.Sprintf("/api/db/%d/keys?count=x", dbID)), 400, "INVALID_FIELD", "count")
		requireError(t, b.get(t, fmt.Sprintf("/api/db/%d/keys?type=a+b", dbID)), 400, "INVALID_FIELD", "type")
	})

	t.Run("String", func(t *testing.T) {
		res := b.get(t, keyPath("str"))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, map[string]any{"name": "str", "type": "string", "ttl": float64(-1), "length": float64(5),
			"value": "hello", "cursor": "0", "truncated": false}, res.body)

		res = b.get(t, keyPath("ttl"))
		requireStatus(t, res, http.StatusOK)
		require.Greater(t, res.body["ttl"], float64(900))
	})

	t.Run("StringTruncatedAndPaged", func(t *testing.T) {
		res := b.get(t, keyPath("big"))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, float64(len(big)), res.body["length"])
		require.Len(t, res.body["value"], 64<<10)
		require.Equal(t, true, res.body["truncated"])
		require.Equal(t, "65536", res.body["cursor"])

		res = b.get(t, keyPath("big")+"?cursor=65536")
		requireStatus(t, res, http.StatusOK)
		require.Len(t, res.body["value"], len(big)-64<<10)
		require.Equal(t, false, res.body["truncated"])
		require.Equal(t, "0", res.body["cursor"])

		res = b.get(t, keyPath("big")+"?count=10&cursor=5")
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "xxxxxxxxxx", res.body["value"])
		require.Equal(t, "15", res.body["cursor"])
	})

	t.Run("BinarySafe", func(t *testing.T) {
		res := b.get(t, keyPath("\xffbin"))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, map[string]any{"base64": base64.StdEncoding.EncodeToString([]byte("\xffbin"))}, res.body["name"])
		require.Equal(t, map[string]any{"base64": base64.StdEncoding.EncodeToString([]byte("\x00\xfe"))}, res.body["value"])
	})

	t.Run("KeyNamesWithSlashes", func(t *testing.T) {
		// The rest of the path is the key, verbatim, even unescaped.
		for key, value := range map[string]string{"a/b/": "slashes", "a//b": "double"} {
			res := b.get(t, fmt.Sprintf("/api/db/%d/keys/%s", dbID, key))
			requireStatus(t, res, http.StatusOK)
			require.Equal(t, value, res.body["value"])
			res = b.get(t, keyPath(key))
			requireStatus(t, res, http.StatusOK)
			require.Equal(t, value, res.body["value"])
		}
	})

	t.Run("Hash", func(t *testing.T) {
		res := b.get(t, keyPath("h"))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "hash", res.body["type"])
		require.Equal(t, float64(3), res.body["length"])
		require.Equal(t, []any{
			map[string]any{"field": "a", "value": "1"},
			map[string]any{"field": "b", "value": "2"},
			map[string]any{"field": "c", "value": "3"},
		}, res.body["value"])
		require.Equal(t, false, res.body["truncated"])
	})

	t.Run("HashPaged", func(t *testing.T) {
		fields := map[string]bool{}
		cursor, pages := "0", 0
		for {
			res := b.get(t, keyPath("bigh")+"?count=100&cursor="+cursor)
			requireStatus(t, res, http.StatusOK)
			require.Equal(t, float64(600), res.body["length"])
			for _, fv := range res.body["value"].([]any) {
				fields[fv.(map[string]any)["field"].(string)] = true
			}
			pages++
			cursor = res.body["cursor"].(string)
			require.Equal(t, cursor != "0", res.body["truncated"])
			if cursor == "0" {
				break
			}
		}
		require.Len(t, fields, 600)
		require.Greater(t, pages, 1)
	})

	t.Run("ListPaged", func(t *testing.T) {
		res := b.get(t, keyPath("l"))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "list", res.body["type"])
		require.Equal(t, float64(250), res.body["length"])
		require.Len(t, res.body["value"], 100)
		require.Equal(t, "item000", res.body["value"].([]any)[0])
		require.Equal(t, "100", res.body["cursor"])
		require.Equal(t, true, res.body["truncated"])

		res = b.get(t, keyPath("l")+"?cursor=200")
		requireStatus(t, res, http.StatusOK)
		require.Len(t, res.body["value"], 50)
		require.Equal(t, "item249", res.body["value"].([]any)[49])
		require.Equal(t, "0", res.body["cursor"])
		require.Equal(t, false, res.body["truncated"])

		requireError(t, b.get(t, keyPath("l")+"?count=1001"), 400, "INVALID_FIELD", "count", "integer from 1 to 1000")
		requireError(t, b.get(t, keyPath("l")+"?cursor=-1"), 400, "INVALID_CURSOR", "cursor")
	})

	t.Run("Set", func(t *testing.T) {
		res := b.get(t, keyPath("s"))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "set", res.body["type"])
		require.Equal(t, []any{"a", "b", "c"}, res.body["value"])
	})

	t.Run("SortedSetWithScores", func(t *testing.T) {
		res := b.get(t, keyPath("z"))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "zset", res.body["type"])
		require.Equal(t, []any{
			map[string]any{"member": "a", "score": float64(1)},
			map[string]any{"member": "b", "score": 2.5},
			map[string]any{"member": "c", "score": "inf"},
		}, res.body["value"])
	})

	t.Run("StreamPaged", func(t *testing.T) {
		res := b.get(t, keyPath("x")+"?count=2")
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "stream", res.body["type"])
		require.Equal(t, float64(3), res.body["length"])
		require.Equal(t, []any{
			map[string]any{"id": "1-0", "fields": []any{map[string]any{"field": "n", "value": "0"}, map[string]any{"field": "m", "value": "v"}}},
			map[string]any{"id": "2-0", "fields": []any{map[string]any{"field": "n", "value": "1"}, map[string]any{"field": "m", "value": "v"}}},
		}, res.body["value"])
		require.Equal(t, "2-0", res.body["cursor"])
		require.Equal(t, true, res.body["truncated"])

		res = b.get(t, keyPath("x")+"?count=2&cursor=2-0")
		requireStatus(t, res, http.StatusOK)
		require.Len(t, res.body["value"], 1)
		require.Equal(t, "0", res.body["cursor"])
		require.Equal(t, false, res.body["truncated"])

		requireError(t, b.get(t, keyPath("x")+"?cursor=abc"), 400, "INVALID_CURSOR", "cursor")
	})

	t.Run("KeyNotFound", func(t *testing.T) {
		requireError(t, b.get(t, keyPath("nope")), http.StatusNotFound, "KEY_NOT_FOUND", "", `"nope"`)
	})
}
