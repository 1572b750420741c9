package task

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"clouddb"
)

// ServerFootprintBytes is what a redis-server takes before it holds any data: the RSS of
// an idle redis-server 7.0 (jemalloc), measured at 11.6 MiB, rounded up.
const ServerFootprintBytes = 12 << 20

// footprint is what a database costs in the memory budget: every server's maxmemory (its
// shard's share of the dataset, rounded up: the replica of a shard has the same) plus
// every server's own footprint, so that neither a database sized near 0 nor a replica
// or shard is free. A replicated 3-shard database is 6 servers.
func footprint(spec *clouddb.DatabaseSpec) int64 {
	shards := int64(spec.NumberOfShards())
	perServer := (spec.MaxMemoryBytes() + shards - 1) / shards
	return int64(spec.Servers()) * (perServer + ServerFootprintBytes)
}

// reserveTopology checks that a database changed from old to spec still fits the host's
// memory budget. A change that adds servers (replication turned on, more shards) and does
// not fit is refused with the rule it breaks; a change that only grows the dataset gets
// reserveMemory's error, as a create does. Both happen in the processing phase, so a dry
// run is refused alike.
func reserveTopology(ctx context.Context, v *env, tx clouddb.Tx, old, spec *clouddb.DatabaseSpec) error {
	err := reserveMemory(ctx, v, tx, footprint(old), footprint(spec))
	e := clouddb.AsError(err)
	if e == nil || e.Type != clouddb.ErrTypeNoMemory || spec.Servers() <= old.Servers() {
		return err
	}
	return clouddb.Errorf(http.StatusConflict, clouddb.ErrTypeTopologyExceedsHostMemory,
		"database: %s would run %s instead of %s; every server counts its maxmemory and %s of its own, and %s",
		topologyChange(old, spec), describeServers(spec), describeServers(old), gib(ServerFootprintBytes), strings.TrimPrefix(e.Description, "database: "))
}

// topologyChange names what adds servers.
func topologyChange(old, spec *clouddb.DatabaseSpec) string {
	switch {
	case spec.Replication && !old.Replication && spec.NumberOfShards() > old.NumberOfShards():
		return "turning replication on and growing the shards"
	case spec.Replication && !old.Replication:
		return "turning replication on (a replica beside each primary, with the same maxmemory)"
	default:
		return fmt.Sprintf("growing the shards from %d to %d", old.NumberOfShards(), spec.NumberOfShards())
	}
}

// describeServers renders a topology as "2 servers (1 shard with a replica) of 0.5 GB
// maxmemory".
func describeServers(spec *clouddb.DatabaseSpec) string {
	shards := spec.NumberOfShards()
	what := fmt.Sprintf("%d shard", shards)
	if shards > 1 {
		what += "s"
	}
	if spec.Replication {
		what += ", each with a replica"
	}
	per := (spec.MaxMemoryBytes() + int64(shards) - 1) / int64(shards)
	n := spec.Servers()
	noun := "server"
	if n > 1 {
		noun = "servers"
	}
	return fmt.Sprintf("%d %s (%s) of %s maxmemory", n, noun, what, gib(per))
}
