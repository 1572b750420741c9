package cloudapi

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"clouddb"
)

// The read path serves most GETs without SQL: what a request needs from the store is
// cached in memory and trusted while the store's version (its count of committed writes)
// has not moved.

// maxCached bounds the key cache; past it the cache starts over. Unknown keys are cached
// too (so that they cost what known ones do), but none longer than maxKeyLength: the cache
// holds at most a few MiB.
const maxCached = 10000

// authTTL is how long a looked-up key and its account are reused. The secret is still
// checked on every request; only an account's plan changed by `clouddb admin` (another
// process) can take this long to be seen.
const authTTL = 2 * time.Second

type authEntry struct {
	key     *clouddb.APIKey
	account *clouddb.Account
	// caller is key and account as the handlers take them, made once per lookup.
	caller *caller
	at     time.Time
}

// authCache is read by every request and written about once per key every authTTL:
// its reads take no lock, so that requests on both cores never wait for each other here.
type authCache struct {
	m sync.Map // key → authEntry
	n atomic.Int64
}

func (c *authCache) get(key string, now time.Time) (authEntry, bool) {
	v, ok := c.m.Load(key)
	if !ok {
		return authEntry{}, false
	}
	e := v.(authEntry)
	if now.Sub(e.at) > authTTL {
		return authEntry{}, false
	}
	return e, true
}

func (c *authCache) put(key string, e authEntry) {
	if c.n.Load() >= maxCached {
		// Concurrent puts may pass the bound by a few entries before one of them clears.
		c.m.Clear()
		c.n.Store(0)
	}
	if _, loaded := c.m.Swap(key, e); !loaded {
		c.n.Add(1)
	}
}

// The answer cache is bounded by bytes, not by entries: a query string is the caller's to
// choose, and one answer may be large, so a count bound let 100 requests take gigabytes.
const (
	// viewCacheBytes is the most the cached answers take together, keys included.
	viewCacheBytes = 32 << 20
	// maxViewBytes is the largest answer that is cached; a larger one is made every time.
	maxViewBytes = 1 << 20
	// viewOverhead is what an entry costs besides its key and body (list element, map
	// slot, headers of the slices), so that many tiny entries are bounded too.
	viewOverhead = 160
)

// view is a rendered answer and the store version it was read at.
type view struct {
	version uint64
	status  int
	body    []byte
}

type viewEntry struct {
	key string
	view
	// used is the cache's tick when the entry was last put or read: the least recently
	// used entries are evicted first.
	used atomic.Uint64
}

func (e *viewEntry) size() int64 { return int64(len(e.key)+len(e.body)) + viewOverhead }

// viewCache keeps the most recently used answers within its byte budget. A hit takes
// only the read lock and marks its entry with the current tick (an atomic store, and only
// when the tick moved), so that hits on both cores do not wait for each other.
type viewCache struct {
	// budget and entryMax are viewCacheBytes and maxViewBytes unless a test sets them.
	budget, entryMax int64
	// tick advances at every put.
	tick atomic.Uint64

	mu    sync.RWMutex
	m     map[string]*viewEntry
	bytes int64
}

func (c *viewCache) get(key []byte, version uint64) (view, bool) {
	c.mu.RLock()
	e, ok := c.m[string(key)] // the conversion in a map index does not allocate
	c.mu.RUnlock()
	if !ok {
		return view{}, false
	}
	if e.version != version {
		// Stale for good: the version only moves forward.
		c.mu.Lock()
		if c.m[e.key] == e {
			c.remove(e)
		}
		c.mu.Unlock()
		return view{}, false
	}
	if t := c.tick.Load(); e.used.Load() != t {
		e.used.Store(t)
	}
	return e.view, true
}

func (c *viewCache) put(key string, v view) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*viewEntry)
		if c.budget == 0 {
			c.budget = viewCacheBytes
		}
		if c.entryMax == 0 {
			c.entryMax = maxViewBytes
		}
	}
	if old, ok := c.m[key]; ok {
		c.remove(old)
	}
	e := &viewEntry{key: key, view: v}
	if e.size() > c.entryMax {
		return
	}
	e.used.Store(c.tick.Add(1))
	c.m[key] = e
	c.bytes += e.size()
	if c.bytes > c.budget {
		c.evict()
	}
}

// evict drops the least recently used entries until the cache holds at most seven eighths
// of its budget, so that a flood of new answers sorts the entries once every so many
// puts, not at each.
func (c *viewCache) evict() {
	es := make([]*viewEntry, 0, len(c.m))
	for _, e := range c.m {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *viewEntry) int { return cmp.Compare(a.used.Load(), b.used.Load()) })
	for _, e := range es {
		if c.bytes <= c.budget*7/8 {
			break
		}
		c.remove(e)
	}
}

func (c *viewCache) remove(e *viewEntry) {
	delete(c.m, e.key)
	c.bytes -= e.size()
}

// size reports the entries and bytes the cache holds.
func (c *viewCache) size() (entries int, bytes int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m), c.bytes
}
