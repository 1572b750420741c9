package local_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
	"clouddb/drivertest"
)

// TestConformance runs the drivers' conformance suite on the local driver, with every
// capability on. Each case's driver has a directory of its own, so database IDs do not
// clash with the other tests'; endpoint ports come from freePort, as theirs do.
func TestConformance(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install -y redis-server")
	}
	ca := newCA(t)
	var dirs sync.Map // *local.Driver → its directory, for Kill
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) clouddb.Driver {
			dir := t.TempDir()
			d := tlsDriver(t, dir, ca)
			dirs.Store(d, dir)
			t.Cleanup(func() { dirs.Delete(d) })
			return d
		},
		Instance: func(t *testing.T, id int) clouddb.Instance {
			return clouddb.Instance{
				DatabaseID:      id,
				Port:            freePort(t),
				Password:        "s3cret-" + strconv.Itoa(id),
				MaxMemoryBytes:  64 * mb,
				EvictionPolicy:  "volatile-lru",
				DataPersistence: "none",
				Shards:          1,
			}
		},
		Addr: func(t *testing.T, _ clouddb.Driver, in clouddb.Instance) string {
			return fmt.Sprintf("127.0.0.1:%d", in.Port)
		},
		Kill: func(t *testing.T, d clouddb.Driver, in clouddb.Instance, addr string) {
			dir, ok := dirs.Load(d)
			require.True(t, ok, "a driver of this harness")
			killAndWait(t, servingPid(t, dir.(string), in, addr))
		},
		Reopen: func(t *testing.T, d clouddb.Driver) clouddb.Driver {
			dir, ok := dirs.Load(d)
			require.True(t, ok, "a driver of this harness")
			return tlsDriver(t, dir.(string), ca)
		},
		CA:                ca.CertificatePEM(),
		Parallel:          true,
		Persistence:       true,
		PersistenceChange: true,
		Replication:       true,
		Cluster:           true,
		TLS:               true,
		ReplicaOf:         true,
	})
}

// servingPid is the pid of the server of database in that serves addr, found from the
// driver's files: in a cluster each node has its own port (topology.json); otherwise the
// primary node, as the topology names it, serves the endpoint.
func servingPid(t *testing.T, dir string, in clouddb.Instance, addr string) int {
	t.Helper()
	_, portText, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	dbDir := filepath.Join(dir, strconv.Itoa(in.DatabaseID))
	data, err := os.ReadFile(filepath.Join(dbDir, "topology.json"))
	var topo struct {
		Primary int
		Ports   map[string]struct{ Port int }
	}
	if err == nil {
		require.NoError(t, json.Unmarshal(data, &topo))
	} else {
		require.ErrorIs(t, err, os.ErrNotExist)
	}
	node := -1
	if len(topo.Ports) == 0 {
		require.Equal(t, in.Port, port, "a database that is not a cluster serves its endpoint only")
		node = topo.Primary
	}
	for idx, p := range topo.Ports {
		if p.Port == port {
			node, err = strconv.Atoi(idx)
			require.NoError(t, err)
		}
	}
	require.GreaterOrEqual(t, node, 0, "no node of database %d serves %s", in.DatabaseID, addr)
	nodeDir := dbDir
	if node != 0 {
		nodeDir = filepath.Join(dbDir, "node"+strconv.Itoa(node))
	}
	pidText, err := os.ReadFile(filepath.Join(nodeDir, "redis.pid"))
	require.NoError(t, err)
	p, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	require.NoError(t, err)
	return p
}

var _ clouddb.Driver = (*local.Driver)(nil)
