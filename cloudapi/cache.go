package cloudapi

import (
	"sync"
	"time"

	"clouddb"
)

// The read path serves most GETs without SQL: what a request needs from the store is
// cached in memory and trusted while the store's version (its count of committed writes)
// has not moved.

// maxCached bounds each cache; past it the cache starts over.
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

type authCache struct {
	mu sync.Mutex
	m  map[string]authEntry
}

func (c *authCache) get(key string, now time.Time) (authEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || now.Sub(e.at) > authTTL {
		return authEntry{}, false
	}
	return e, true
}

func (c *authCache) put(key string, e authEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = make(map[string]authEntry)
	}
	c.m[key] = e
}

// view is a rendered answer and the store version it was read at.
type view struct {
	version uint64
	status  int
	body    []byte
}

type viewCache struct {
	mu sync.Mutex
	m  map[string]view
}

func (c *viewCache) get(key string, version uint64) (view, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok && v.version == version
}

func (c *viewCache) put(key string, v view) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = make(map[string]view)
	}
	c.m[key] = v
}
