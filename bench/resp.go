package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// respCommand encodes a command as a RESP array of bulk strings.
func respCommand(args ...string) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return b.String()
}

// authPing opens a connection to a Redis server, authenticates with password (when not
// empty) and sends PING; it returns nil once the server answered PONG.
func authPing(addr, password string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	req := respCommand("PING")
	want := []string{"+PONG"}
	if password != "" {
		req = respCommand("AUTH", password) + req
		want = []string{"+OK", "+PONG"}
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		return err
	}
	rd := bufio.NewReader(conn)
	for _, w := range want {
		line, err := rd.ReadString('\n')
		if err != nil {
			return err
		}
		if got := strings.TrimRight(line, "\r\n"); got != w {
			return fmt.Errorf("%s answered %q, want %q", addr, got, w)
		}
	}
	return nil
}

// waitPing polls authPing every interval until it succeeds, or fails at the deadline.
func waitPing(ctx context.Context, addr, password string, interval time.Duration, deadline time.Time) error {
	for {
		err := authPing(addr, password, time.Second)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no PONG before the deadline: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// endpoint is a database a client can reach.
type endpoint struct {
	addr     string
	password string
}

// waitAllPing waits until every endpoint answers an authenticated PING, polling each
// every interval with at most par connections at once, and returns when the last one
// answered.
func waitAllPing(ctx context.Context, eps []endpoint, interval time.Duration, deadline time.Time) (time.Time, error) {
	const par = 32
	sem := make(chan struct{}, par)
	var (
		mu    sync.Mutex
		last  time.Time
		first error
		wg    sync.WaitGroup
	)
	for _, ep := range eps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := waitPing(ctx, ep.addr, ep.password, interval, deadline)
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if now.After(last) {
				last = now
			}
		})
	}
	wg.Wait()
	return last, first
}
