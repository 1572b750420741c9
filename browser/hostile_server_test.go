package browser_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileCluster is a fake server that says it is a cluster node and answers CLUSTER
// NODES with nodes; it counts the connections it gets.
func hostileCluster(t *testing.T, nodes string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	reply := func(c net.Conn, args []string) {
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			_, _ = io.WriteString(c, "-ERR unknown command 'HELLO'\r\n")
		case "PING":
			_, _ = io.WriteString(c, "+PONG\r\n")
		case "INFO":
			text := "redis_version:7.0.0\r\nredis_mode:cluster\r\n"
			_, _ = fmt.Fprintf(c, "$%d\r\n%s\r\n", len(text), text)
		case "CLUSTER":
			text := nodes
			if len(args) > 1 && strings.EqualFold(args[1], "INFO") {
				text = "cluster_state:ok\r\n"
			}
			_, _ = fmt.Fprintf(c, "$%d\r\n%s\r\n", len(text), text)
		default:
			_, _ = io.WriteString(c, "+OK\r\n")
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				rd := bufio.NewReader(c)
				for {
					line, err := rd.ReadString('\n')
					if err != nil || len(line) < 2 {
						return
					}
					n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
					args := make([]string, 0, n)
					for range n {
						l, err := rd.ReadString('\n')
						if err != nil || len(l) < 2 {
							return
						}
						size, _ := strconv.Atoi(strings.TrimSpace(l[1:]))
						b := make([]byte, size+2)
						if _, err := io.ReadFull(rd, b); err != nil {
							return
						}
						args = append(args, string(b[:size]))
					}
					if len(args) == 0 {
						return
					}
					reply(c, args)
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// A cluster seed that lists more nodes than a cluster has is refused before any of them
// is dialled with the record's password (which would scan the ports it names).
func TestClusterSeedListingTooManyNodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var sb strings.Builder
	for i := 1; i <= 1001; i++ {
		fmt.Fprintf(&sb, "id%d 127.0.0.1:%d@1 master - 0 0 1 connected\n", i, 20000+i)
	}
	port := hostileCluster(t, sb.String())
	res := b.post(t, "/api/db/", map[string]any{"name": "hostile", "connectionType": "CLUSTER", "password": "s3cret",
		"seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": port}}})
	require.Equal(t, http.StatusFailedDependency, res.status, "%s", res.raw)
	require.Contains(t, string(res.raw), "lists 1001 cluster nodes: at most 1000")
	requireNoSecrets(t, res.raw, "s3cret")
}
