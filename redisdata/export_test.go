package redisdata

// SetSessionHook makes every replication session call f first (to inject a fault); the
// returned function removes it.
func SetSessionHook(f func(Endpoint)) func() {
	testSessionHook = f
	return func() { testSessionHook = nil }
}

// Guarded is guarded, for tests.
var Guarded = guarded

// RDBCRC is rdbCRC, for tests.
var RDBCRC = rdbCRC
