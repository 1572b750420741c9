package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"
)

// respConn is one connection to a Redis server for pipelined commands.
type respConn struct {
	conn net.Conn
	rd   *bufio.Reader
	wr   *bufio.Writer
}

// dialRedis connects to addr and authenticates with password (when not empty).
func dialRedis(addr, password string, timeout time.Duration) (*respConn, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	c := &respConn{conn: conn, rd: bufio.NewReaderSize(conn, 64<<10), wr: bufio.NewWriterSize(conn, 64<<10)}
	if password != "" {
		if _, err := c.do(timeout, "AUTH", password); err != nil {
			conn.Close()
			return nil, fmt.Errorf("AUTH on %s: %w", addr, err)
		}
	}
	return c, nil
}

func (c *respConn) close() { c.conn.Close() }

// send buffers one command. A write error sticks in the bufio.Writer and is returned by
// the next Flush, which every caller checks.
func (c *respConn) send(args ...string) {
	_, _ = c.wr.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		_, _ = c.wr.WriteString("$" + strconv.Itoa(len(a)) + "\r\n")
		_, _ = c.wr.WriteString(a)
		_, _ = c.wr.WriteString("\r\n")
	}
}

// redisError is an error reply.
type redisError string

func (e redisError) Error() string { return string(e) }

// read reads one reply: a string (simple or bulk; "" for a null), an int64, a []any, or
// a redisError as the error.
func (c *respConn) read() (any, error) {
	line, err := c.rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty RESP line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, redisError(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.rd, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return []any(nil), err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = c.read(); err != nil {
				var re redisError
				if !errors.As(err, &re) {
					return nil, err
				}
				out[i] = re
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected RESP line %q", line)
}

// do sends one command and reads its reply, within timeout.
func (c *respConn) do(timeout time.Duration, args ...string) (any, error) {
	_ = c.conn.SetDeadline(time.Now().Add(timeout))
	c.send(args...)
	if err := c.wr.Flush(); err != nil {
		return nil, err
	}
	return c.read()
}

// doInt is do for a command answering an integer.
func (c *respConn) doInt(timeout time.Duration, args ...string) (int64, error) {
	v, err := c.do(timeout, args...)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%s answered %v, want an integer", args[0], v)
	}
	return n, nil
}

// infoField reads "name:value" from an INFO answer.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	return ""
}

// The import dataset: keys of every type in the proportions of a typical cache-and-state
// workload, with values that compress as text does (LZF in the RDB file).
//
//	40% strings: JSON documents of 80–1000 bytes, 30% of them with a TTL of a week
//	10% counters (integer strings)
//	20% hashes of 6–20 short fields (listpack)
//	 8% lists of 5–60 elements of 20–200 bytes (quicklist)
//	 8% sets: half of 5–60 integers (intset), half of 5–40 words (listpack or hashtable)
//	 8% sorted sets of 5–100 members (listpack)
//	 6% streams of 5–30 entries of three fields, half with a consumer group
//
// and every 2,000th record also one large collection of each kind (a 2,000-field hash, a
// 5,000-element list, a 1,000-member set and a 1,000-member sorted set), which Redis
// keeps in its non-compact encodings.

var words = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike
november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu red green blue
amber violet orange silver golden crimson azure north south east west order payment invoice customer
account session cart item product price stock warehouse shipped pending active closed london paris
berlin tokyo madrid lisbon oslo vienna prague dublin`)

// datasetGen writes the dataset's records in order; the same seed gives the same data.
type datasetGen struct {
	rng  *rand.Rand
	next int // id of the next record
	keys int // keys written so far
}

func newDatasetGen(seed uint64) *datasetGen {
	return &datasetGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *datasetGen) word() string { return words[g.rng.IntN(len(words))] }

func (g *datasetGen) text(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g.word())
	}
	return b.String()[:n]
}

// document is a JSON record of about n bytes.
func (g *datasetGen) document(id, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":%d,"user":"%s.%s%d","email":"%s@%s.example","score":%d.%02d,"tags":["%s","%s"],"updated":%d,"note":"`,
		id, g.word(), g.word(), g.rng.IntN(1000), g.word(), g.word(), g.rng.IntN(10000), g.rng.IntN(100), g.word(), g.word(),
		1_700_000_000+g.rng.IntN(50_000_000))
	if rest := n - b.Len() - 2; rest > 0 {
		b.WriteString(g.text(rest))
	}
	b.WriteString(`"}`)
	return b.String()
}

// record sends the commands of one record on c and returns how many it sent.
func (g *datasetGen) record(c *respConn) int {
	id := g.next
	g.next++
	key := func(prefix string) string { return prefix + ":" + strconv.Itoa(id) }
	sent := 0
	send := func(args ...string) { c.send(args...); sent++ }
	r := g.rng
	switch p := r.IntN(100); {
	case p < 40:
		doc := g.document(id, 80+r.IntN(920))
		if r.IntN(10) < 3 {
			send("SET", key("session"), doc, "EX", "604800")
		} else {
			send("SET", key("doc"), doc)
		}
	case p < 50:
		send("SET", key("counter"), strconv.Itoa(r.IntN(1_000_000)))
	case p < 70:
		args := []string{"HSET", key("user")}
		for i, n := 0, 6+r.IntN(15); i < n; i++ {
			args = append(args, "f"+strconv.Itoa(i)+"_"+g.word(), g.text(4+r.IntN(40)))
		}
		send(args...)
	case p < 78:
		args := []string{"RPUSH", key("queue")}
		for i, n := 0, 5+r.IntN(56); i < n; i++ {
			args = append(args, g.text(20+r.IntN(181)))
		}
		send(args...)
	case p < 86:
		args := []string{"SADD", key("tags")}
		if r.IntN(2) == 0 {
			for i, n := 0, 5+r.IntN(56); i < n; i++ {
				args = append(args, strconv.Itoa(r.IntN(1_000_000)))
			}
		} else {
			for i, n := 0, 5+r.IntN(36); i < n; i++ {
				args = append(args, g.word()+"-"+strconv.Itoa(r.IntN(1000)))
			}
		}
		send(args...)
	case p < 94:
		args := []string{"ZADD", key("rank")}
		for i, n := 0, 5+r.IntN(96); i < n; i++ {
			args = append(args, strconv.Itoa(r.IntN(100_000)), g.word()+":"+strconv.Itoa(r.IntN(100_000)))
		}
		send(args...)
	default:
		k := key("events")
		for i, n := 0, 5+r.IntN(26); i < n; i++ {
			send("XADD", k, "*", "type", g.word(), "user", strconv.Itoa(r.IntN(100_000)), "payload", g.text(20+r.IntN(100)))
		}
		if r.IntN(2) == 0 {
			send("XGROUP", "CREATE", k, "workers", "0")
		}
	}
	g.keys++
	if id%2000 == 1999 {
		big := func(cmd, k string, n int, member func(i int) []string) {
			args := []string{cmd, k}
			for i := range n {
				args = append(args, member(i)...)
			}
			send(args...)
			g.keys++
		}
		big("HSET", key("bighash"), 2000, func(i int) []string { return []string{"field:" + strconv.Itoa(i), g.text(10 + r.IntN(60))} })
		big("RPUSH", key("biglist"), 5000, func(int) []string { return []string{g.text(10 + r.IntN(90))} })
		big("SADD", key("bigset"), 1000, func(i int) []string { return []string{"member:" + strconv.Itoa(i) + ":" + g.word()} })
		big("ZADD", key("bigzset"), 1000, func(i int) []string {
			return []string{strconv.Itoa(r.IntN(1_000_000)), "player:" + strconv.Itoa(i) + ":" + g.word()}
		})
	}
	return sent
}

// fill writes n more records into the server of c, pipelined, and fails on the first
// error reply.
func (g *datasetGen) fill(ctx context.Context, c *respConn, n int) error {
	const batch = 256 // records per round trip
	for done := 0; done < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		_ = c.conn.SetDeadline(time.Now().Add(time.Minute))
		sent := 0
		for i := 0; i < batch && done < n; i++ {
			sent += g.record(c)
			done++
		}
		if err := c.wr.Flush(); err != nil {
			return err
		}
		for range sent {
			if _, err := c.read(); err != nil {
				return fmt.Errorf("filling the dataset: %w", err)
			}
		}
	}
	return nil
}
