package cloudapi

import (
	"container/list"
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
	at      time.Time
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
}

func (e *viewEntry) size() int64 { return int64(len(e.key)+len(e.body)) + viewOverhead }

// viewCache keeps the most recently used answers within its byte budget.
type viewCache struct {
	// budget and entryMax are viewCacheBytes and maxViewBytes unless a test sets them.
	budget, entryMax int64

	mu    sync.Mutex
	m     map[string]*list.Element
	lru   list.List // of *viewEntry, the most recently used first
	bytes int64
}

func (c *viewCache) get(key []byte, version uint64) (view, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[string(key)] // the conversion in a map index does not allocate
	if !ok {
		return view{}, false
	}
	e := el.Value.(*viewEntry)
	if e.version != version {
		// Stale for good: the version only moves forward.
		c.remove(el)
		return view{}, false
	}
	c.lru.MoveToFront(el)
	return e.view, true
}

func (c *viewCache) put(key string, v view) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*list.Element)
		if c.budget == 0 {
			c.budget = viewCacheBytes
		}
		if c.entryMax == 0 {
			c.entryMax = maxViewBytes
		}
	}
	if el, ok := c.m[key]; ok {
		c.remove(el)
	}
	e := &viewEntry{key: key, view: v}
	if e.size() > c.entryMax {
		return
	}
	c.m[key] = c.lru.PushFront(e)
	c.bytes += e.size()
	for c.bytes > c.budget {
		c.remove(c.lru.Back())
	}
}

func (c *viewCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*viewEntry)
	delete(c.m, e.key)
	c.bytes -= e.size()
}

// size reports the entries and bytes the cache holds.
func (c *viewCache) size() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}
