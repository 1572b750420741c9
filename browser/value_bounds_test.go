package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The byte bounds of value reads, as the package documents them.
const (
	valueBudget = 16 << 20
	elementCap  = 64 << 10
	// allocBound is what serving one answer may allocate in this process: the reply
	// from the server, the view and its JSON (encoding/json copies a large answer several
	// times), about ten times a full page, with room for noise. Reading the list or the hash
	// below whole (the former code) allocates half a gigabyte to a gigabyte.
	allocBound = 16 * valueBudget
)

// readBounded GETs path and checks that the answer stays under the byte budget and that
// serving it allocated a bounded amount. The client's buffer is allocated before the
// measure and the answer decoded after it, so that the measure is the server's.
func readBounded(t *testing.T, b *testBundle, path string) response {
	t.Helper()
	buf := bytes.NewBuffer(make([]byte, 0, 2*valueBudget))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := http.Get(b.url + path)
	require.NoError(t, err)
	_, err = buf.ReadFrom(io.LimitReader(res.Body, 2*valueBudget-1))
	res.Body.Close()
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	out := response{status: res.StatusCode, header: res.Header, raw: buf.String()}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%s: %d KiB answer (read up to %d MiB), %d MiB allocated", path, len(out.raw)>>10, 2*valueBudget>>20, alloc>>20)
	require.Equal(t, http.StatusOK, out.status)
	require.Less(t, len(out.raw), valueBudget+64<<10, "the answer is over the byte budget")
	require.Less(t, alloc, uint64(allocBound), "serving the answer allocated %d MiB", alloc>>20)
	require.NoError(t, json.Unmarshal(buf.Bytes(), &out.body))
	return out
}

// TestValueByteBounds reads values that are large in bytes but small in count: none is
// loaded whole, each answer stays under the budget and says what was cut. Not parallel:
// it measures the process's allocations.
func TestValueByteBounds(t *testing.T) {
	requireRedis(t)
	b := setup(t)
	ctx := context.Background()
	const password = "bounds-Secret-1"
	srv := startRedis(t, freePort(t), "--requirepass", password)
	rc := client(t, srv.addr(), password)
	res := b.post(t, "/api/db", map[string]any{"name": "big", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": srv.port, "password": password})
	requireStatus(t, res, http.StatusCreated)
	dbID := id(t, res.body["id"])
	keyPath := func(key string) string { return fmt.Sprintf("/api/db/%d/keys/%s", dbID, key) }
	twoMB := strings.Repeat("l", 2<<20)

	t.Run("ListOf100Times2MB", func(t *testing.T) {
		pipe := rc.Pipeline()
		for range 100 {
			pipe.RPush(ctx, "biglist", twoMB)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { rc.Del(ctx, "biglist") })

		res := readBounded(t, b, keyPath("biglist")+"?count=1000")
		require.Equal(t, float64(100), res.body["length"])
		items := res.body["value"].([]any)
		require.Len(t, items, 100, "64 KiB of each of 100 elements fit the budget")
		for _, it := range items {
			require.Equal(t, twoMB[:elementCap], it)
		}
		require.Equal(t, true, res.body["cut"])
		cut := res.body["cutElements"].([]any)
		require.Len(t, cut, 100)
		require.Equal(t, map[string]any{"index": float64(0), "length": float64(2 << 20)}, cut[0])
		require.Equal(t, map[string]any{"index": float64(99), "length": float64(2 << 20)}, cut[99])
		require.Equal(t, "0", res.body["cursor"])
		require.Equal(t, false, res.body["truncated"])
	})

	t.Run("String50MB", func(t *testing.T) {
		require.NoError(t, rc.SetRange(ctx, "bigstr", 50<<20-1, "z").Err())
		t.Cleanup(func() { rc.Del(ctx, "bigstr") })
		res := readBounded(t, b, keyPath("bigstr")+"?count=1048576")
		require.Equal(t, float64(50<<20), res.body["length"])
		require.Equal(t, true, res.body["truncated"])
		require.Equal(t, "1048576", res.body["cursor"])
		require.Len(t, res.body["value"], 1<<20)
	})

	t.Run("HashByBudget", func(t *testing.T) {
		// 1000 values of 60 KiB (under the cap): 60 MB, so the budget, not the count,
		// ends the page; paging on gets every field exactly once.
		val := strings.Repeat("h", 60<<10)
		pipe := rc.Pipeline()
		for i := range 1000 {
			pipe.HSet(ctx, "bighash", fmt.Sprintf("f%03d", i), val)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { rc.Del(ctx, "bighash") })

		seen := map[string]bool{}
		cursor, pages := "0", 0
		for {
			require.Less(t, pages, 50, "the paging does not end")
			res := readBounded(t, b, keyPath("bighash")+"?count=1000&cursor="+cursor)
			pages++
			require.Equal(t, float64(1000), res.body["length"])
			require.NotContains(t, res.body, "cut", "no value is over the cap")
			page := res.body["value"].([]any)
			require.NotEmpty(t, page)
			size := 0
			for _, x := range page {
				fv := x.(map[string]any)
				require.Equal(t, val, fv["value"])
				require.NotContains(t, fv, "truncated")
				seen[fv["field"].(string)] = true
				size += len(val) + 4
			}
			require.LessOrEqual(t, size, valueBudget)
			cursor = res.body["cursor"].(string)
			require.Equal(t, cursor != "0", res.body["truncated"])
			if cursor == "0" {
				break
			}
		}
		require.Len(t, seen, 1000)
		require.Greater(t, pages, 3, "one page cannot hold more than 16 MiB")
	})

	t.Run("HashValuesCut", func(t *testing.T) {
		pipe := rc.Pipeline()
		for i := range 20 {
			pipe.HSet(ctx, "cuthash", fmt.Sprintf("f%02d", i), twoMB)
		}
		pipe.HSet(ctx, "cuthash", "small", "v")
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { rc.Del(ctx, "cuthash") })
		res := readBounded(t, b, keyPath("cuthash"))
		require.Equal(t, true, res.body["cut"])
		page := res.body["value"].([]any)
		require.Len(t, page, 21)
		require.Equal(t, map[string]any{"field": "f00", "value": twoMB[:elementCap], "truncated": true, "valueLength": float64(2 << 20)}, page[0])
		require.Equal(t, map[string]any{"field": "small", "value": "v"}, page[20])
	})

	t.Run("MembersAndStreamValuesCut", func(t *testing.T) {
		long := strings.Repeat("m", elementCap+10)
		require.NoError(t, rc.ZAdd(ctx, "cutz", redis.Z{Score: 1, Member: long}).Err())
		require.NoError(t, rc.SAdd(ctx, "cuts", long, "short").Err())
		require.NoError(t, rc.XAdd(ctx, &redis.XAddArgs{Stream: "cutx", ID: "1-0", Values: []any{"f", long}}).Err())
		t.Cleanup(func() { rc.Del(ctx, "cutz", "cuts", "cutx") })

		res := readBounded(t, b, keyPath("cutz"))
		require.Equal(t, []any{map[string]any{"member": long[:elementCap], "score": float64(1), "truncated": true, "memberLength": float64(len(long))}}, res.body["value"])
		require.Equal(t, true, res.body["cut"])

		res = readBounded(t, b, keyPath("cuts"))
		require.Equal(t, []any{long[:elementCap], "short"}, res.body["value"])
		require.Equal(t, []any{map[string]any{"index": float64(0), "length": float64(len(long))}}, res.body["cutElements"])

		res = readBounded(t, b, keyPath("cutx"))
		require.Equal(t, []any{map[string]any{"id": "1-0", "fields": []any{
			map[string]any{"field": "f", "value": long[:elementCap], "truncated": true, "valueLength": float64(len(long))}}}}, res.body["value"])
		require.Equal(t, true, res.body["cut"])
	})

	t.Run("ListingCutsLongNames", func(t *testing.T) {
		name := strings.Repeat("k", elementCap+1)
		require.NoError(t, rc.Set(ctx, name, "v", 0).Err())
		t.Cleanup(func() { rc.Del(ctx, name) })
		res := readBounded(t, b, fmt.Sprintf("/api/db/%d/keys?match=kkk*", dbID))
		size, err := rc.MemoryUsage(ctx, name).Result()
		require.NoError(t, err)
		require.Equal(t, []any{map[string]any{"name": name[:elementCap], "type": "string", "ttl": float64(-1), "truncated": true, "nameLength": float64(len(name)),
			"size": float64(size), "length": float64(1)}}, res.body["keys"])
	})
}
