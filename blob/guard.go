package blob

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Host names of cloud metadata services, refused before any resolution.
var forbiddenNames = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"metadata.azure.internal":    true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}

// Single addresses of metadata and host services outside the link-local range.
var forbiddenAddrs = map[netip.Addr]string{
	netip.MustParseAddr("fd00:ec2::254"):   "cloud metadata address",     // AWS IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"): "cloud metadata address",     // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"):   "cloud host service address", // Azure WireServer
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	reserved4   = netip.MustParsePrefix("240.0.0.0/4") // includes 255.255.255.255
	nat64       = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sixToFour   = netip.MustParsePrefix("2002::/16")
	ipv4Compat  = netip.MustParsePrefix("::/96")
)

// CheckAddr reports whether ip may be dialed: nil, or an error matching
// ErrForbiddenAddress for link-local (169.254.0.0/16, fe80::/10), cloud metadata,
// unspecified and "this network" (0.0.0.0/8, ::), multicast, broadcast and reserved
// (240.0.0.0/4) addresses, including IPv4 addresses embedded in IPv6 ones (mapped,
// compatible, NAT64, 6to4). Loopback and private addresses are allowed.
func CheckAddr(ip netip.Addr) error {
	ip = ip.WithZone("")
	if why := forbiddenReason(ip); why != "" {
		return fmt.Errorf("%w: %s (%s)", ErrForbiddenAddress, ip, why)
	}
	return nil
}

func forbiddenReason(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid address"
	}
	ip = ip.Unmap()
	if why, ok := forbiddenAddrs[ip]; ok {
		return why
	}
	switch {
	case ip == netip.MustParseAddr("169.254.169.254"):
		return "cloud metadata address"
	case ip.IsUnspecified():
		return "unspecified address"
	case ip.IsLinkLocalUnicast():
		return "link-local address"
	case ip.IsMulticast():
		return "multicast address"
	}
	if ip.Is4() {
		if thisNetwork.Contains(ip) {
			return "\"this network\" address"
		}
		if reserved4.Contains(ip) {
			return "broadcast or reserved address"
		}
		return ""
	}
	// IPv4 embedded in IPv6: check the IPv4 part.
	b := ip.As16()
	var embedded []netip.Addr
	for _, p := range nat64 {
		if p.Contains(ip) {
			embedded = append(embedded, netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		}
	}
	if sixToFour.Contains(ip) {
		embedded = append(embedded, netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	if ipv4Compat.Contains(ip) && !ip.IsLoopback() {
		embedded = append(embedded, netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	for _, e := range embedded {
		if why := forbiddenReason(e); why != "" {
			return why + " (embedded in " + ip.String() + ")"
		}
	}
	return ""
}

// CheckHost refuses a host name of a cloud metadata service, or a literal IP address that
// CheckAddr refuses. It does not resolve: the dialer checks what names resolve to.
func CheckHost(host string) error {
	h := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if forbiddenNames[h] {
		return fmt.Errorf("%w: %s (cloud metadata host)", ErrForbiddenAddress, h)
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return CheckAddr(ip)
	}
	return nil
}

// Resolve resolves host and returns its addresses, or an ErrForbiddenAddress error when
// any of them is refused. It is for connections made by another program (redis-server's
// REPLICAOF): give it the returned address rather than the name, so that a later
// resolution cannot answer differently. Go clients should dial with Dial instead.
func Resolve(ctx context.Context, host string, opts Options) ([]netip.Addr, error) {
	if err := CheckHost(host); err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip.WithZone("")}, nil
	}
	r := opts.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("%w: resolving %s: %v", ErrUnreachable, host, err)
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
		if err := CheckAddr(a); err != nil {
			return nil, fmt.Errorf("%s resolves to a refused address: %w", host, err)
		}
	}
	return addrs, nil
}

// guardControl is the net.Dialer Control function: it sees the numeric address about to
// be connected, whatever name resolution or redirect led there.
func guardControl(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("%w: network %s", ErrForbiddenAddress, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address %q", ErrForbiddenAddress, address)
	}
	return CheckAddr(ap.Addr())
}

// Dial connects to address ("host:port") over TCP through the guard: the host name is
// checked, and every address it resolves to is checked just before it is connected.
// opts.Timeout bounds the connect; the caller sets its own read and write deadlines.
// Usable as a go-redis Dialer.
func Dial(ctx context.Context, network, address string, opts Options) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("%w: network %s", ErrUnsupported, network)
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q", ErrInvalid, address)
	}
	if err := CheckHost(host); err != nil {
		return nil, err
	}
	d := &net.Dialer{
		Timeout:  opts.timeout(),
		Resolver: opts.Resolver,
		Control:  guardControl,
	}
	return d.DialContext(ctx, network, address)
}

// dial is Dial with every read and write bounded by a deadline of opts.Timeout from its
// start, so that a stalled peer cannot hang a transfer.
func dial(ctx context.Context, network, address string, opts Options) (net.Conn, error) {
	c, err := Dial(ctx, network, address, opts)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, timeout: opts.timeout()}, nil
}

// dialBound is dial for protocols whose library does not watch the context once
// connected (FTP): when ctx ends, the connection's reads and writes fail.
func dialBound(ctx context.Context, network, address string, opts Options) (net.Conn, error) {
	c, err := dial(ctx, network, address, opts)
	if err != nil {
		return nil, err
	}
	sc := c.(*stallConn)
	sc.ctx = ctx
	sc.stop = context.AfterFunc(ctx, func() {
		sc.dead.Store(true)
		_ = sc.SetDeadline(time.Unix(1, 0)) // wake a blocked read or write
	})
	return sc, nil
}

// stallConn bounds every read and write by a deadline set when it starts: a transfer may
// be long, but never stalled for longer than the timeout.
type stallConn struct {
	net.Conn
	timeout time.Duration
	ctx     context.Context // set by dialBound
	stop    func() bool
	dead    atomic.Bool
}

func (c *stallConn) Read(p []byte) (int, error) {
	if c.dead.Load() {
		return 0, c.ctx.Err()
	}
	if err := c.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	if c.dead.Load() { // ctx ended while the deadline was being set
		return 0, c.ctx.Err()
	}
	n, err := c.Conn.Read(p)
	if err != nil && c.dead.Load() {
		err = c.ctx.Err()
	}
	return n, err
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.dead.Load() {
		return 0, c.ctx.Err()
	}
	// Both deadlines: a reader blocked while a long request body is sent (the HTTP
	// transport's read loop) must not time out while the write makes progress.
	if err := c.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	if c.dead.Load() { // ctx ended while the deadline was being set
		return 0, c.ctx.Err()
	}
	n, err := c.Conn.Write(p)
	if err != nil && c.dead.Load() {
		err = c.ctx.Err()
	}
	return n, err
}

func (c *stallConn) Close() error {
	if c.stop != nil {
		c.stop()
	}
	return c.Conn.Close()
}
