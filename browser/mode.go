package browser

import (
	"context"
	"net/http"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Modes of a server, as INFO server's redis_mode names them.
const (
	modeStandalone = "standalone"
	modeCluster    = "cluster"
	modeSentinel   = "sentinel"
)

// detectMode reads what the server behind cl, registered as STANDALONE in c, is, as the
// tool does when it adds a database: a standalone server is tested and found; a sentinel
// is refused with a 400 saying to register it as SENTINEL (its key reads would all fail);
// a node of a cluster turns c into a CLUSTER record seeded by that node, whose nodes are
// discovered and checked as for a record registered as CLUSTER.
func (d *dialer) detectMode(ctx context.Context, cl *redis.Client, c *connection) (*found, error) {
	at := endpoint{c.Host, c.Port}
	info, _ := cl.Info(ctx, "server").Result() // an ACL may refuse INFO: then the mode is guessed below
	mode := infoField(info, "redis_mode")
	if mode == "" {
		mode = clusterEnabled(ctx, cl)
	}
	switch mode {
	case modeSentinel:
		sc := redis.NewSentinelClient(d.options(at, c.Password))
		defer sc.Close()
		monitored := "none"
		if masters, err := sentinelMasters(ctx, sc, at, c.UseTLS); err == nil {
			monitored = masterNames(masters)
		}
		return nil, fieldErr(http.StatusBadRequest, errSentinelAsStandalone, "connectionType",
			"the server at %s is a sentinel (it monitors %s), not a database: register it with connectionType SENTINEL, "+
				"sentinelHost, sentinelPort and sentinelMaster.serviceName (POST /api/redis-sentinel/get-databases lists its master groups)",
			at.addr(), monitored)
	case modeCluster:
		c.Type = typeCluster
		c.SeedNodes = []endpoint{at}
		c.Host, c.Port = "", 0
		return d.probeCluster(ctx, c)
	}
	return &found{version: infoField(info, "redis_version")}, nil
}

// clusterEnabled guesses the mode of a server that does not answer INFO: CLUSTER INFO
// answers on a cluster node only.
func clusterEnabled(ctx context.Context, cl *redis.Client) string {
	info, err := cl.ClusterInfo(ctx).Result()
	if err == nil && strings.Contains(info, "cluster_state:") {
		return modeCluster
	}
	return modeStandalone
}
