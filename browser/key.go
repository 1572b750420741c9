package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"clouddb"
)

// Bounds of browsing.
const (
	// browseTimeout bounds one browsing request.
	browseTimeout = 20 * time.Second
	// scanBudget bounds the keys one listing request examines (the sum of the SCAN COUNT
	// hints), so that a rare pattern over a large keyspace answers with a cursor to go on
	// rather than scanning everything.
	scanBudget = 10_000
	// Defaults and maxima of count: bytes for a string, elements for the other types.
	defaultKeyCount     = 200
	maxKeyCount         = 10_000
	defaultStringCount  = 64 << 10
	maxStringCount      = 1 << 20
	defaultElementCount = 100
	maxElementCount     = 1000
)

func (s *Server) registerKeyRoutes() {
	s.route("GET /api/db/{id}/keys", s.scanKeys)
	// GET /api/db/{id}/keys/{key} is served by serveHTTP, outside the mux.
}

// bstr is a binary-safe string: JSON text when it is valid UTF-8, else {"base64": "..."}.
type bstr string

func (b bstr) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(b)) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString([]byte(b))})
}

// score is a sorted-set score; the infinities, which JSON numbers cannot hold, are the
// strings "inf" and "-inf".
type score float64

func (f score) MarshalJSON() ([]byte, error) {
	switch {
	case math.IsInf(float64(f), 1):
		return []byte(`"inf"`), nil
	case math.IsInf(float64(f), -1):
		return []byte(`"-inf"`), nil
	}
	return json.Marshal(float64(f))
}

type keyView struct {
	Name bstr   `json:"name"`
	Type string `json:"type"`
	// TTL is in seconds, -1 when the key does not expire.
	TTL int64 `json:"ttl"`
}

type keysView struct {
	// Cursor continues the listing; "0" when it is complete.
	Cursor string    `json:"cursor"`
	Keys   []keyView `json:"keys"`
}

type keyValueView struct {
	Name bstr   `json:"name"`
	Type string `json:"type"`
	TTL  int64  `json:"ttl"`
	// Length is the whole value's: bytes of a string, elements of the other types.
	Length int64 `json:"length"`
	Value  any   `json:"value"`
	// Cursor gets the next part of the value; "0" when Value holds the rest of it.
	Cursor string `json:"cursor"`
	// Truncated says that the value goes on beyond Value.
	Truncated bool `json:"truncated"`
	// Note explains a value that is not shown.
	Note string `json:"note,omitempty"`
}

type fieldValue struct {
	Field bstr `json:"field"`
	Value bstr `json:"value"`
}

type memberScore struct {
	Member bstr  `json:"member"`
	Score  score `json:"score"`
}

type streamEntry struct {
	ID     string       `json:"id"`
	Fields []fieldValue `json:"fields"`
}

// open loads the connection named by the path with its secrets, and its dialer.
func (s *Server) open(ctx context.Context, r *http.Request) (*connection, *dialer, error) {
	id, ok := pathID(r)
	if !ok {
		return nil, nil, connectionNotFound(r.PathValue("id"))
	}
	c, pair, err := s.store.connectionWithSecrets(ctx, id)
	if errors.Is(err, clouddb.ErrNotFound) {
		return nil, nil, connectionNotFound(r.PathValue("id"))
	} else if err != nil {
		return nil, nil, err
	}
	d, err := newDialer(c, pair)
	if err != nil {
		return nil, nil, err
	}
	return c, d, nil
}

var typeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

func (s *Server) scanKeys(r *http.Request) (int, any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), browseTimeout)
	defer cancel()
	q := r.URL.Query()
	match := q.Get("match")
	if match == "" {
		match = "*"
	}
	typ := q.Get("type")
	if typ != "" && !typeName.MatchString(typ) {
		return 0, nil, invalid("type", "query parameter must be a key type such as string, list, set, zset, hash or stream, got %q", typ)
	}
	count, err := queryInt(r, "count", defaultKeyCount, 1, maxKeyCount)
	if err != nil {
		return 0, nil, err
	}
	cursor := q.Get("cursor")
	if cursor == "" {
		cursor = "0"
	}
	c, d, err := s.open(ctx, r)
	if err != nil {
		return 0, nil, err
	}

	var out keysView
	if c.Type == typeCluster {
		out.Keys, out.Cursor, err = d.scanCluster(ctx, c, cursor, match, typ, count)
	} else {
		n, perr := strconv.ParseUint(cursor, 10, 64)
		if perr != nil {
			return 0, nil, badCursor(cursor)
		}
		cl := d.client(c)
		defer cl.Close()
		budget := scanBudget
		var next uint64
		out.Keys, next, err = scanNode(ctx, cl, n, match, typ, count, count, &budget)
		if err != nil {
			err = classify(err, "the database", c.UseTLS)
		}
		out.Cursor = strconv.FormatUint(next, 10)
	}
	if err != nil {
		return 0, nil, err
	}
	if out.Keys == nil {
		out.Keys = []keyView{}
	}
	return http.StatusOK, out, nil
}

func badCursor(cursor string) error {
	return fieldErr(http.StatusBadRequest, errInvalidCursor, "cursor", "%q is not a cursor this API returned; start with 0", cursor)
}

// scanNode SCANs one server from cursor until it has want keys, the server is done or
// the budget is spent, and describes the keys it found.
func scanNode(ctx context.Context, cl redis.Cmdable, cursor uint64, match, typ string, hint, want int, budget *int) ([]keyView, uint64, error) {
	var names []string
	for {
		var (
			keys []string
			err  error
		)
		if typ != "" {
			keys, cursor, err = cl.ScanType(ctx, cursor, match, int64(hint), typ).Result()
		} else {
			keys, cursor, err = cl.Scan(ctx, cursor, match, int64(hint)).Result()
		}
		if err != nil {
			return nil, 0, err
		}
		names = append(names, keys...)
		*budget -= hint
		if cursor == 0 || len(names) >= want || *budget <= 0 {
			break
		}
	}
	keys, err := describe(ctx, cl, names)
	return keys, cursor, err
}

// describe gets the type and TTL of keys in one pipeline; keys gone meanwhile are left out.
func describe(ctx context.Context, cl redis.Cmdable, names []string) ([]keyView, error) {
	if len(names) == 0 {
		return nil, nil
	}
	pipe := cl.Pipeline()
	types := make([]*redis.StatusCmd, len(names))
	ttls := make([]*redis.Cmd, len(names))
	for i, name := range names {
		types[i] = pipe.Type(ctx, name)
		ttls[i] = pipe.Do(ctx, "TTL", name)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]keyView, 0, len(names))
	for i, name := range names {
		typ := types[i].Val()
		ttl, _ := ttls[i].Int64()
		if typ == "none" || ttl == -2 {
			continue
		}
		out = append(out, keyView{Name: bstr(name), Type: typ, TTL: ttl})
	}
	return out, nil
}

// scanCluster lists the keys of every primary, one after the other in address order.
// The cursor says which primary and where in it: base64url of "host:port cursor".
func (d *dialer) scanCluster(ctx context.Context, c *connection, cursor, match, typ string, count int) ([]keyView, string, error) {
	seed, at, err := d.connectSeed(ctx, c)
	if err != nil {
		return nil, "", err
	}
	nodes, err := clusterNodes(ctx, seed, at, c.UseTLS)
	seed.Close()
	if err != nil {
		return nil, "", err
	}
	var primaries []endpoint
	for _, n := range nodes {
		if n.slots {
			primaries = append(primaries, endpoint{n.Host, n.Port})
		}
	}
	i, cur := 0, uint64(0)
	if cursor != "0" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		addr, pos, ok := strings.Cut(string(raw), " ")
		n, perr := strconv.ParseUint(pos, 10, 64)
		if err != nil || !ok || perr != nil {
			return nil, "", badCursor(cursor)
		}
		i = slices.IndexFunc(primaries, func(e endpoint) bool { return e.addr() == addr })
		if i < 0 {
			return nil, "", fieldErr(http.StatusBadRequest, errInvalidCursor, "cursor", "the cursor is at %s, which is no longer a primary of the cluster; start again with 0", addr)
		}
		cur = n
	}
	var out []keyView
	budget := scanBudget
	for i < len(primaries) {
		e := primaries[i]
		cl := redis.NewClient(d.options(e, c.Password))
		keys, next, err := scanNode(ctx, cl, cur, match, typ, count, count-len(out), &budget)
		cl.Close()
		if err != nil {
			return nil, "", classify(err, "primary "+e.addr(), c.UseTLS)
		}
		out = append(out, keys...)
		if next != 0 {
			return out, clusterCursor(e, next), nil
		}
		i, cur = i+1, 0
		if len(out) >= count || budget <= 0 {
			break
		}
	}
	if i >= len(primaries) {
		return out, "0", nil
	}
	return out, clusterCursor(primaries[i], 0), nil
}

func clusterCursor(e endpoint, cursor uint64) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s %d", e.addr(), cursor))
}

var streamID = regexp.MustCompile(`^[0-9]+-[0-9]+$`)

func (s *Server) getKey(r *http.Request) (int, any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), browseTimeout)
	defer cancel()
	c, d, err := s.open(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	key := r.PathValue("key")
	cl := d.client(c)
	defer cl.Close()
	typ, err := cl.Type(ctx, key).Result()
	if err != nil {
		return 0, nil, classify(err, "the database", c.UseTLS)
	}
	if typ == "none" {
		return 0, nil, clouddb.NotFound(errKeyNotFound, "connection %d has no key %q", c.ID, key)
	}
	ttl, err := cl.Do(ctx, "TTL", key).Int64()
	if err != nil {
		return 0, nil, classify(err, "the database", c.UseTLS)
	}
	v := &keyValueView{Name: bstr(key), Type: typ, TTL: ttl, Cursor: "0"}
	if err := readValue(ctx, r, cl, key, v); err != nil {
		if e := clouddb.AsError(err); e != nil {
			return 0, nil, err
		}
		return 0, nil, classify(err, "the database", c.UseTLS)
	}
	return http.StatusOK, v, nil
}

// readValue reads the part of the value that the cursor and count query parameters ask
// for into v. The cursor is an offset for strings (bytes), lists and sorted sets, a SCAN
// cursor for hashes and sets, and the last entry ID read for streams.
func readValue(ctx context.Context, r *http.Request, cl redis.UniversalClient, key string, v *keyValueView) error {
	cursor := r.URL.Query().Get("cursor")
	if cursor == "" {
		cursor = "0"
	}
	def, hi := defaultElementCount, maxElementCount
	if v.Type == "string" {
		def, hi = defaultStringCount, maxStringCount
	}
	count, err := queryInt(r, "count", def, 1, hi)
	if err != nil {
		return err
	}
	offset := func() (int64, error) {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 0 {
			return 0, badCursor(cursor)
		}
		return n, nil
	}
	// page sets the cursor after reading n elements from off.
	page := func(off int64, n int) {
		if next := off + int64(n); next < v.Length && n > 0 {
			v.Cursor, v.Truncated = strconv.FormatInt(next, 10), true
		}
	}
	switch v.Type {
	case "string":
		off, err := offset()
		if err != nil {
			return err
		}
		if v.Length, err = cl.StrLen(ctx, key).Result(); err != nil {
			return err
		}
		s, err := cl.GetRange(ctx, key, off, off+int64(count)-1).Result()
		if err != nil {
			return err
		}
		v.Value = bstr(s)
		page(off, len(s))
	case "list":
		off, err := offset()
		if err != nil {
			return err
		}
		if v.Length, err = cl.LLen(ctx, key).Result(); err != nil {
			return err
		}
		items, err := cl.LRange(ctx, key, off, off+int64(count)-1).Result()
		if err != nil {
			return err
		}
		v.Value = bstrs(items)
		page(off, len(items))
	case "zset":
		off, err := offset()
		if err != nil {
			return err
		}
		if v.Length, err = cl.ZCard(ctx, key).Result(); err != nil {
			return err
		}
		zs, err := cl.ZRangeWithScores(ctx, key, off, off+int64(count)-1).Result()
		if err != nil {
			return err
		}
		out := make([]memberScore, 0, len(zs))
		for _, z := range zs {
			out = append(out, memberScore{Member: bstr(fmt.Sprint(z.Member)), Score: score(z.Score)})
		}
		v.Value = out
		page(off, len(zs))
	case "hash":
		if v.Length, err = cl.HLen(ctx, key).Result(); err != nil {
			return err
		}
		var items []string
		if items, err = scanElements(ctx, cl, "HSCAN", "HGETALL", key, cursor, count, v); err != nil {
			return err
		}
		out := make([]fieldValue, 0, len(items)/2)
		for i := 0; i+1 < len(items); i += 2 {
			out = append(out, fieldValue{Field: bstr(items[i]), Value: bstr(items[i+1])})
		}
		if v.Cursor == "0" && cursor == "0" {
			slices.SortFunc(out, func(a, b fieldValue) int { return strings.Compare(string(a.Field), string(b.Field)) })
		}
		v.Value = out
	case "set":
		if v.Length, err = cl.SCard(ctx, key).Result(); err != nil {
			return err
		}
		items, err := scanElements(ctx, cl, "SSCAN", "SMEMBERS", key, cursor, count, v)
		if err != nil {
			return err
		}
		if v.Cursor == "0" && cursor == "0" {
			slices.Sort(items)
		}
		v.Value = bstrs(items)
	case "stream":
		start := "-"
		if cursor != "0" {
			if !streamID.MatchString(cursor) {
				return badCursor(cursor)
			}
			start = "(" + cursor
		}
		if v.Length, err = cl.XLen(ctx, key).Result(); err != nil {
			return err
		}
		entries, err := readStream(ctx, cl, key, start, count+1)
		if err != nil {
			return err
		}
		if len(entries) > count {
			entries = entries[:count]
			v.Cursor, v.Truncated = entries[count-1].ID, true
		}
		v.Value = entries
	default:
		v.Note = fmt.Sprintf("values of type %s are not shown", v.Type)
	}
	return nil
}

func bstrs(items []string) []bstr {
	out := make([]bstr, len(items))
	for i, s := range items {
		out[i] = bstr(s)
	}
	return out
}

// scanElements reads a hash or a set: whole (all command) when it is small and read
// from the start, else by SCAN (scan command) from cursor until it has count elements.
// SCAN may return an element twice if the value is rehashed between pages.
func scanElements(ctx context.Context, cl redis.UniversalClient, scan, all, key, cursor string, count int, v *keyValueView) ([]string, error) {
	if cursor == "0" && v.Length <= int64(count) {
		return cl.Do(ctx, all, key).StringSlice()
	}
	cur, err := strconv.ParseUint(cursor, 10, 64)
	if err != nil {
		return nil, badCursor(cursor)
	}
	per := 1
	if scan == "HSCAN" {
		per = 2
	}
	var items []string
	for {
		res, err := cl.Do(ctx, scan, key, cur, "COUNT", count).Slice()
		if err != nil {
			return nil, err
		}
		if len(res) != 2 {
			return nil, fmt.Errorf("%s: unexpected reply %v", scan, res)
		}
		if cur, err = strconv.ParseUint(fmt.Sprint(res[0]), 10, 64); err != nil {
			return nil, fmt.Errorf("%s: unexpected cursor %v", scan, res[0])
		}
		page, _ := res[1].([]any)
		for _, x := range page {
			items = append(items, fmt.Sprint(x))
		}
		if cur == 0 || len(items) >= count*per {
			break
		}
	}
	if cur != 0 {
		v.Cursor, v.Truncated = strconv.FormatUint(cur, 10), true
	}
	return items, nil
}

// readStream reads up to n entries from start with XRANGE, keeping the order of their
// fields.
func readStream(ctx context.Context, cl redis.UniversalClient, key, start string, n int) ([]streamEntry, error) {
	res, err := cl.Do(ctx, "XRANGE", key, start, "+", "COUNT", n).Slice()
	if err != nil {
		return nil, err
	}
	out := make([]streamEntry, 0, len(res))
	for _, x := range res {
		e, ok := x.([]any)
		if !ok || len(e) != 2 {
			return nil, fmt.Errorf("XRANGE: unexpected entry %v", x)
		}
		fields, _ := e[1].([]any)
		entry := streamEntry{ID: fmt.Sprint(e[0]), Fields: make([]fieldValue, 0, len(fields)/2)}
		for i := 0; i+1 < len(fields); i += 2 {
			entry.Fields = append(entry.Fields, fieldValue{Field: bstr(fmt.Sprint(fields[i])), Value: bstr(fmt.Sprint(fields[i+1]))})
		}
		out = append(out, entry)
	}
	return out, nil
}

// queryInt reads an optional integer query parameter within [lo, hi].
func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalid(name, "query parameter must be an integer from %d to %d, got %q", lo, hi, v)
	}
	return n, nil
}
