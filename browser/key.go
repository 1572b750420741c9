package browser

import (
	"cmp"
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
		// Quoted here rather than with json.Marshal, which takes a fresh buffer per call
		// and grows it by doubling: on a page of large elements that was most of the
		// allocation of an answer.
		return appendQuoted(make([]byte, 0, len(b)+16), string(b)), nil
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString([]byte(b))})
}

// appendQuoted appends s, valid UTF-8, as a JSON string.
func appendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == '\u2028' || r == '\u2029' { // valid JSON, but not JavaScript
				dst = append(append(dst, s[start:i]...), `\u202`...)
				dst = append(dst, hex[r&0xf])
				start = i + size
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b': // as encoding/json writes them
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	return append(append(dst, s[start:]...), '"')
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
	// Truncated says that Name was cut to elementCap bytes; NameLength is its full length.
	Truncated  bool `json:"truncated,omitempty"`
	NameLength int  `json:"nameLength,omitempty"`
	// Size is MEMORY USAGE in bytes and Length the value's length (keys_count.go);
	// each is left out when the server does not tell it.
	Size   *int64 `json:"size,omitempty"`
	Length *int64 `json:"length,omitempty"`
}

type keysView struct {
	// Cursor continues the listing; "0" when it is complete.
	Cursor string `json:"cursor"`
	// Total is DBSIZE (summed over a cluster's primaries); Scanned is how many keys the
	// SCAN calls of this request examined (the sum of their COUNT hints).
	Total   int64     `json:"total"`
	Scanned int       `json:"scanned"`
	Keys    []keyView `json:"keys"`
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
	// Cut says that at least one element of Value was cut to elementCap bytes; the
	// element says its full length (for lists and sets, CutElements does).
	Cut         bool         `json:"cut,omitempty"`
	CutElements []cutElement `json:"cutElements,omitempty"`
}

// cutElement is an element of a list or set page that was cut: its index in the page
// and its full length in bytes.
type cutElement struct {
	Index  int   `json:"index"`
	Length int64 `json:"length"`
}

// fieldValue is a field of a hash or a stream entry; a field or value cut to elementCap
// bytes has truncated set and its full length beside it.
type fieldValue struct {
	Field       bstr  `json:"field"`
	Value       bstr  `json:"value"`
	Truncated   bool  `json:"truncated,omitempty"`
	FieldLength int64 `json:"fieldLength,omitempty"`
	ValueLength int64 `json:"valueLength,omitempty"`
}

type memberScore struct {
	Member       bstr  `json:"member"`
	Score        score `json:"score"`
	Truncated    bool  `json:"truncated,omitempty"`
	MemberLength int64 `json:"memberLength,omitempty"`
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
	d, err := newDialer(c, pair, s.resolver)
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
		out.Keys, out.Cursor, out.Scanned, out.Total, err = d.scanCluster(ctx, c, cursor, match, typ, count)
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
		out.Scanned = scanBudget - budget
		if err == nil {
			out.Total, err = cl.DBSize(ctx).Result()
		}
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
	var (
		names []string
		bytes int
	)
	for {
		var (
			keys []string
			next uint64
			err  error
		)
		if typ != "" {
			keys, next, err = cl.ScanType(ctx, cursor, match, int64(hint), typ).Result()
		} else {
			keys, next, err = cl.Scan(ctx, cursor, match, int64(hint)).Result()
		}
		if err != nil {
			return nil, 0, err
		}
		size := 0
		for _, k := range keys {
			size += min(len(k), elementCap)
		}
		// A page that would take the names past the byte budget is left for the next
		// request (its cursor is still valid), unless it is the first.
		if len(names) > 0 && bytes+size > valueBudget {
			break
		}
		names, bytes, cursor = append(names, keys...), bytes+size, next
		*budget -= hint
		if cursor == 0 || len(names) >= want || *budget <= 0 {
			break
		}
	}
	keys, err := describe(ctx, cl, names, typ)
	return keys, cursor, err
}

// describe gets the type, TTL, size and length of keys in one pipeline (typ, when not
// empty, is the type they all have); keys gone meanwhile are left out.
func describe(ctx context.Context, cl redis.Cmdable, names []string, typ string) ([]keyView, error) {
	if len(names) == 0 {
		return nil, nil
	}
	pipe := cl.Pipeline()
	types := make([]*redis.StatusCmd, len(names))
	ttls := make([]*redis.Cmd, len(names))
	stats := make([]keyStats, len(names))
	for i, name := range names {
		types[i] = pipe.Type(ctx, name)
		ttls[i] = pipe.Do(ctx, "TTL", name)
		stats[i] = queueStats(ctx, pipe, name, typ)
	}
	// A length command of another type than the key's answers WRONGTYPE: only the
	// errors of TYPE and TTL are the connection's.
	_, _ = pipe.Exec(ctx)
	for i := range names {
		if err := cmp.Or(types[i].Err(), ttls[i].Err()); err != nil {
			return nil, err
		}
	}
	out := make([]keyView, 0, len(names))
	var js []jsonKey
	for i, name := range names {
		typ := types[i].Val()
		ttl, _ := ttls[i].Int64()
		if typ == "none" || ttl == -2 {
			continue
		}
		kv := keyView{Name: bstr(name), Type: typ, TTL: ttl}
		kv.Size, kv.Length = stats[i].read(typ)
		if typ == jsonType {
			js = append(js, jsonKey{name: name, at: len(out)})
		}
		if len(name) > elementCap {
			kv.Name, kv.Truncated, kv.NameLength = bstr(name[:elementCap]), true, len(name)
		}
		out = append(out, kv)
	}
	return out, jsonLengths(ctx, cl, js, out)
}

// scanCluster lists the keys of every primary, one after the other in address order,
// and says how many keys its SCANs examined and how many the primaries hold.
// The cursor says which primary and where in it: base64url of "host:port cursor".
func (d *dialer) scanCluster(ctx context.Context, c *connection, cursor, match, typ string, count int) (keys []keyView, next string, scanned int, total int64, err error) {
	primaries, err := d.primaries(ctx, c)
	if err != nil {
		return nil, "", 0, 0, err
	}
	if total, err = d.clusterDBSize(ctx, c, primaries); err != nil {
		return nil, "", 0, 0, err
	}
	keys, next, scanned, err = d.scanPrimaries(ctx, c, primaries, cursor, match, typ, count)
	return keys, next, scanned, total, err
}

// scanPrimaries walks the primaries from the cursor.
func (d *dialer) scanPrimaries(ctx context.Context, c *connection, primaries []endpoint, cursor, match, typ string, count int) ([]keyView, string, int, error) {
	i, cur := 0, uint64(0)
	if cursor != "0" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		addr, pos, ok := strings.Cut(string(raw), " ")
		n, perr := strconv.ParseUint(pos, 10, 64)
		if err != nil || !ok || perr != nil {
			return nil, "", 0, badCursor(cursor)
		}
		i = slices.IndexFunc(primaries, func(e endpoint) bool { return e.addr() == addr })
		if i < 0 {
			return nil, "", 0, fieldErr(http.StatusBadRequest, errInvalidCursor, "cursor", "the cursor is at %s, which is no longer a primary of the cluster; start again with 0", addr)
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
			return nil, "", 0, classify(err, "primary "+e.addr(), c.UseTLS)
		}
		out = append(out, keys...)
		if next != 0 {
			return out, clusterCursor(e, next), scanBudget - budget, nil
		}
		i, cur = i+1, 0
		if len(out) >= count || budget <= 0 {
			break
		}
	}
	if i >= len(primaries) {
		return out, "0", scanBudget - budget, nil
	}
	return out, clusterCursor(primaries[i], 0), scanBudget - budget, nil
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
//
// Memory is bounded by bytes, not only by count: a string page is at most maxStringCount
// bytes (GETRANGE), and the elements of the other types are read by a script on the
// server (readScript) that cuts each string to elementCap bytes and stops adding elements
// once valueBudget bytes are in the page, so that neither the reply nor this process
// ever holds a whole large element.
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
	var (
		off int64
		res *elements
	)
	offset := func() (int64, error) {
		n, perr := strconv.ParseInt(cursor, 10, 64)
		if perr != nil || n < 0 {
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
		off, err = offset()
		if err != nil {
			return err
		}
		if v.Length, err = cl.StrLen(ctx, key).Result(); err != nil {
			return err
		}
		var s string
		if s, err = cl.GetRange(ctx, key, off, off+int64(count)-1).Result(); err != nil {
			return err
		}
		v.Value = bstr(s)
		page(off, len(s))
	case "list", "zset":
		off, err = offset()
		if err != nil {
			return err
		}
		if v.Type == "list" {
			v.Length, err = cl.LLen(ctx, key).Result()
		} else {
			v.Length, err = cl.ZCard(ctx, key).Result()
		}
		if err != nil {
			return err
		}
		if res, err = readElements(ctx, cl, key, v.Type, cursor, count); err != nil {
			return err
		}
		if v.Type == "list" {
			v.Value = v.strs(res.parts)
		} else {
			out := make([]memberScore, 0, len(res.parts)/2)
			for i := 0; i+1 < len(res.parts); i += 2 {
				m := memberScore{Member: bstr(res.parts[i].s)}
				if res.parts[i].cut() {
					m.MemberLength, m.Truncated, v.Cut = res.parts[i].n, true, true
				}
				f, _ := strconv.ParseFloat(res.parts[i+1].s, 64) // "inf" and "-inf" parse
				m.Score = score(f)
				out = append(out, m)
			}
			v.Value = out
		}
		page(off, res.elements)
	case "hash", "set":
		if v.Type == "hash" {
			v.Length, err = cl.HLen(ctx, key).Result()
		} else {
			v.Length, err = cl.SCard(ctx, key).Result()
		}
		if err != nil {
			return err
		}
		if _, perr := strconv.ParseUint(cursor, 10, 64); perr != nil {
			return badCursor(cursor)
		}
		if res, err = readElements(ctx, cl, key, v.Type, cursor, count); err != nil {
			return err
		}
		if res.next != "0" {
			v.Cursor, v.Truncated = res.next, true
		}
		whole := v.Cursor == "0" && cursor == "0"
		if v.Type == "set" {
			if whole {
				slices.SortFunc(res.parts, func(a, b part) int { return strings.Compare(a.s, b.s) })
			}
			v.Value = v.strs(res.parts)
			break
		}
		out := make([]fieldValue, 0, len(res.parts)/2)
		for i := 0; i+1 < len(res.parts); i += 2 {
			out = append(out, v.fieldValue(res.parts[i], res.parts[i+1]))
		}
		if whole {
			slices.SortFunc(out, func(a, b fieldValue) int { return strings.Compare(string(a.Field), string(b.Field)) })
		}
		v.Value = out
	case "stream":
		if cursor != "0" && !streamID.MatchString(cursor) {
			return badCursor(cursor)
		}
		if v.Length, err = cl.XLen(ctx, key).Result(); err != nil {
			return err
		}
		if res, err = readElements(ctx, cl, key, v.Type, cursor, count); err != nil {
			return err
		}
		var entries []streamEntry
		if entries, err = v.streamEntries(res.parts); err != nil {
			return err
		}
		if res.more {
			v.Cursor, v.Truncated = entries[len(entries)-1].ID, true
		}
		v.Value = entries
	default:
		v.Note = fmt.Sprintf("values of type %s are not shown", v.Type)
	}
	return nil
}

// Byte bounds of a value read.
const (
	// valueBudget bounds the bytes of the elements one answer holds (before their JSON
	// encoding): a page ends before the element that would cross it, and says so with
	// truncated and a cursor, however small count is. It is far below the memory of the
	// process; a page always holds at least one element, so it always moves on.
	valueBudget = 16 << 20
	// elementCap cuts each string of an element (list item, set or zset member, hash
	// field or value, stream field or value) to this many bytes; the element then says
	// its full length. Read a long one as a string key cannot be done, so it is shown cut.
	elementCap = 64 << 10
	// readBatch is how many elements the script reads at a time, bounding what the
	// server holds for the script besides the page itself.
	readBatch = 8
)

// readScript reads one page of a list, zset, hash, set or stream, with read-only
// commands, cutting every string to ARGV[4] bytes and stopping before the element that
// would take the page past ARGV[5] bytes, or at ARGV[3] elements. It returns the strings,
// their full lengths, the number of elements and where to go on: the next offset (list,
// zset), the SCAN cursor (hash, set: a page of SCAN is taken whole or not at all, so
// that its cursor stays valid), or for a stream the last entry read and whether more
// follow. A stream entry is its ID, its number of strings, then its fields and values.
var readScript = redis.NewScript(`
local key, kind, cursor = KEYS[1], ARGV[1], ARGV[2]
local count, cap, budget, batch = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local out, lens, used, got = {}, {}, 0, 0
-- add appends the strings of one or more elements when they fit the budget (the first
-- always does, so that a page moves on).
local function add(strs, from, to, elements)
  local cut, size = {}, 0
  for i = from, to do
    local s = strs[i]
    if #s > cap then s = string.sub(s, 1, cap) end
    cut[#cut + 1] = s
    size = size + #s
  end
  if got > 0 and used + size > budget then return false end
  for i = from, to do
    out[#out + 1] = cut[i - from + 1]
    lens[#lens + 1] = #strs[i]
  end
  used, got = used + size, got + elements
  return true
end
if kind == 'list' or kind == 'zset' then
  local off = tonumber(cursor)
  local per = 1
  if kind == 'zset' then per = 2 end
  while got < count do
    local n = math.min(batch, count - got)
    local items
    if kind == 'list' then
      items = redis.call('LRANGE', key, off, off + n - 1)
    else
      items = redis.call('ZRANGE', key, off, off + n - 1, 'WITHSCORES')
    end
    if #items == 0 then break end
    for i = 1, #items, per do
      if not add(items, i, i + per - 1, 1) then return {out, lens, got, tostring(off), 0} end
      off = off + 1
    end
    if #items < n * per then break end
  end
  return {out, lens, got, tostring(off), 0}
elseif kind == 'hash' or kind == 'set' then
  local scan, per = 'SSCAN', 1
  if kind == 'hash' then scan, per = 'HSCAN', 2 end
  repeat
    local res = redis.call(scan, key, cursor, 'COUNT', batch)
    local items = res[2]
    if #items > 0 and not add(items, 1, #items, #items / per) then break end
    cursor = res[1]
  until cursor == '0' or got >= count
  return {out, lens, got, cursor, 0}
elseif kind == 'stream' then
  local start = '-'
  if cursor ~= '0' then start = '(' .. cursor end
  while got < count do
    local entries = redis.call('XRANGE', key, start, '+', 'COUNT', math.min(batch, count - got))
    if #entries == 0 then return {out, lens, got, cursor, 0} end
    for _, e in ipairs(entries) do
      local strs = {e[1], tostring(#e[2])}
      for _, s in ipairs(e[2]) do strs[#strs + 1] = s end
      if not add(strs, 1, #strs, 1) then return {out, lens, got, cursor, 1} end
      cursor, start = e[1], '(' .. e[1]
      if got >= count then break end
    end
  end
  local more = 0
  if #redis.call('XRANGE', key, start, '+', 'COUNT', 1) > 0 then more = 1 end
  return {out, lens, got, cursor, more}
end
return redis.error_reply('unsupported type ' .. kind)
`)

// part is a string of an element as read, and its full length in bytes.
type part struct {
	s string
	n int64
}

func (p part) cut() bool { return int64(len(p.s)) < p.n }

// elements is one page of a value read by readScript.
type elements struct {
	parts    []part
	elements int
	next     string
	more     bool
}

func readElements(ctx context.Context, cl redis.UniversalClient, key, kind, cursor string, count int) (*elements, error) {
	res, err := readScript.Run(ctx, cl, []string{key}, kind, cursor, count, elementCap, valueBudget, readBatch).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 5 {
		return nil, fmt.Errorf("read script: unexpected reply of %d items", len(res))
	}
	strs, _ := res[0].([]any)
	lens, _ := res[1].([]any)
	n, _ := res[2].(int64)
	next, _ := res[3].(string)
	more, _ := res[4].(int64)
	if len(strs) != len(lens) {
		return nil, fmt.Errorf("read script: %d strings but %d lengths", len(strs), len(lens))
	}
	out := &elements{parts: make([]part, len(strs)), elements: int(n), next: next, more: more == 1}
	for i := range strs {
		s, _ := strs[i].(string)
		l, _ := lens[i].(int64)
		out.parts[i] = part{s: s, n: l}
	}
	return out, nil
}

// strs is a page of a list or a set: the strings, and the ones cut noted in v.
func (v *keyValueView) strs(parts []part) []bstr {
	out := make([]bstr, len(parts))
	for i, p := range parts {
		out[i] = bstr(p.s)
		if p.cut() {
			v.Cut = true
			v.CutElements = append(v.CutElements, cutElement{Index: i, Length: p.n})
		}
	}
	return out
}

func (v *keyValueView) fieldValue(f, val part) fieldValue {
	fv := fieldValue{Field: bstr(f.s), Value: bstr(val.s)}
	if f.cut() {
		fv.FieldLength, fv.Truncated, v.Cut = f.n, true, true
	}
	if val.cut() {
		fv.ValueLength, fv.Truncated, v.Cut = val.n, true, true
	}
	return fv
}

// streamEntries decodes the entries of a stream page: ID, number of strings, fields and
// values.
func (v *keyValueView) streamEntries(parts []part) ([]streamEntry, error) {
	out := []streamEntry{}
	for i := 0; i < len(parts); {
		if i+1 >= len(parts) {
			return nil, errors.New("read script: truncated stream entry")
		}
		n, err := strconv.Atoi(parts[i+1].s)
		if err != nil || n < 0 || i+2+n > len(parts) {
			return nil, fmt.Errorf("read script: bad stream entry size %q", parts[i+1].s)
		}
		e := streamEntry{ID: parts[i].s, Fields: make([]fieldValue, 0, n/2)}
		for j := i + 2; j+1 < i+2+n; j += 2 {
			e.Fields = append(e.Fields, v.fieldValue(parts[j], parts[j+1]))
		}
		out = append(out, e)
		i += 2 + n
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
