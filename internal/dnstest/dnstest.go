// Package dnstest is a DNS server on loopback for tests: what a name resolves to, told by
// the test, without a network.
package dnstest

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
)

// Resolver returns a resolver that asks a DNS server on loopback which answers every
// A query with answer(name, n), n counting that name's A queries from 1, and AAAA queries
// with nothing.
func Resolver(t *testing.T, answer func(name string, n int) netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	counts := map[string]int{}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true,
				Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				name := strings.TrimSuffix(q.Name.String(), ".")
				counts[name]++
				a := answer(name, counts[name])
				if a.Is4() {
					_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0},
						dnsmessage.AResource{A: a.As4()})
				}
			}
			msg, err := b.Finish()
			if err == nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	server := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx2 context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx2, "udp", server)
	}}
}

// Table is a Resolver that answers names from table, and nothing for other names.
func Table(t *testing.T, table map[string]netip.Addr) *net.Resolver {
	t.Helper()
	return Resolver(t, func(name string, _ int) netip.Addr { return table[name] })
}
