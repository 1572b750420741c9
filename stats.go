package clouddb

import (
	"context"
	"time"
)

// StatsReader is a Driver that can read a running database's figures, those users know
// from redis_exporter, through its own internal access to the servers (never the
// tenant's endpoint or password). It is optional: without it clouddb reports no figures
// per database.
type StatsReader interface {
	// Stats reads the figures of the database's servers. A database of several shards
	// reports the sum over its shards' primaries; replicas, which hold copies of their
	// primaries' data, are not counted. An error means no figures could be read (a
	// server down or starting).
	Stats(ctx context.Context, in Instance) (DatabaseStats, error)
}

// DatabaseStats are one database's figures at one moment.
type DatabaseStats struct {
	// UsedMemoryBytes is the memory the data takes (INFO used_memory).
	UsedMemoryBytes int64
	// MaxMemoryBytes is the servers' memory limit (maxmemory); 0 means none.
	MaxMemoryBytes int64
	// Keys counts the keys of every logical database.
	Keys int64
	// OpsPerSecond is the servers' instantaneous_ops_per_sec.
	OpsPerSecond float64
	// ConnectedClients counts the client connections, the reader's own left out.
	ConnectedClients int64
}

// StatusCounter is a Store that can count what the service's metrics and health report,
// each in one cheap query, outside any transaction. It is optional: a store without it
// has its databases counted through Tx.Databases, and no task queue reported.
type StatusCounter interface {
	// DatabaseCounts counts the databases by status (those being deleted included).
	DatabaseCounts(ctx context.Context) (map[DatabaseStatus]int, error)
	// TaskQueue describes the tasks not finished yet.
	TaskQueue(ctx context.Context) (TaskQueue, error)
}

// TaskQueue is the state of the tasks whose processing has not ended.
type TaskQueue struct {
	// Received counts the tasks waiting to be claimed; InProgress those being processed.
	Received, InProgress int
	// OldestReceived is when the oldest waiting task was submitted; zero when none waits.
	OldestReceived time.Time
}
