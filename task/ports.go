package task

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"clouddb"
)

// Ports hands out the ports databases listen on, from a configured range.
type Ports struct {
	Low, High int
	// Host is where a candidate port is probed; a port another program already holds is
	// skipped.
	Host string
	// Free reports whether a port can be bound; nil probes with a real listen.
	Free func(host string, port int) bool
}

// ParseRange parses "LOW-HIGH".
func ParseRange(s string) (low, high int, err error) {
	var l, h int
	if _, err := fmt.Sscanf(s, "%d-%d", &l, &h); err != nil || l < 1 || h > 65535 || l > h {
		return 0, 0, fmt.Errorf("port range %q: want LOW-HIGH within 1-65535", s)
	}
	return l, h, nil
}

func (p *Ports) free(port int) bool {
	if p.Free != nil {
		return p.Free(p.Host, port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(p.Host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// Allocate picks a port that no database holds and nothing else is bound to. want, when
// non-zero, is the port the caller asked for.
func (p *Ports) Allocate(ctx context.Context, tx clouddb.Tx, want int) (int, error) {
	used, err := tx.UsedPorts(ctx)
	if err != nil {
		return 0, err
	}
	taken := make(map[int]bool, len(used))
	for _, u := range used {
		taken[u] = true
	}
	if want != 0 {
		if want < p.Low || want > p.High {
			return 0, clouddb.Invalid(clouddb.ErrTypeInvalidField, "database: port %d is outside the range %d-%d", want, p.Low, p.High)
		}
		if taken[want] || !p.free(want) {
			return 0, clouddb.Conflict("DATABASE_PORT_IN_USE", "database: port %d is already in use", want)
		}
		return want, nil
	}
	for port := p.Low; port <= p.High; port++ {
		if !taken[port] && p.free(port) {
			return port, nil
		}
	}
	return 0, clouddb.Errorf(503, clouddb.ErrTypeNoPorts, "no free port left in the range %d-%d", p.Low, p.High)
}
