package redisdata_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/redisdata"
)

// endless is a file that begins with head and then repeats body for ever; it counts what
// was read and fails the test's read past max (errReadTooFar).
type endless struct {
	head, body []byte
	read, max  int
	off        int
}

var errReadTooFar = errors.New("the splitter read on and on")

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.max {
		return 0, errReadTooFar
	}
	n := 0
	for n < len(p) && e.read < e.max {
		var b byte
		if e.read < len(e.head) {
			b = e.head[e.read]
		} else {
			b = e.body[e.off%len(e.body)]
			e.off++
		}
		p[n] = b
		n++
		e.read++
	}
	return n, nil
}

// TestSplitRDBHostileBounded: a tenant's file whose form is valid for redis but endless
// in a place where the splitter holds what it reads (the hints of one key, one library
// of functions) is refused after a bounded read, not held in memory as it arrives.
func TestSplitRDBHostileBounded(t *testing.T) {
	const limit = 96 << 20
	hugeLen := append([]byte{0x81}, binary.BigEndian.AppendUint64(nil, 1<<40)...)
	for _, c := range []struct {
		name       string
		head, body []byte
	}{
		// LFU hints repeated: redis takes the last one.
		{"hints", []byte("REDIS0010"), []byte{0xF9, 0x05}},
		// Expiries repeated.
		{"expiries", []byte("REDIS0010"), []byte{0xFC, 1, 2, 3, 4, 5, 6, 7, 8}},
		// A library of functions of a terabyte.
		{"function", append([]byte("REDIS0010\xF5"), hugeLen...), []byte("-- lua --")},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := &endless{head: c.head, body: c.body, max: limit}
			outs := []io.Writer{io.Discard, io.Discard}
			err := redisdata.SplitRDB(outs, func(slot int) int { return slot * 2 / 16384 }, []io.Reader{src})
			require.Error(t, err)
			require.NotErrorIs(t, err, errReadTooFar, "refused within %d bytes (read %d)", limit, src.read)
		})
	}
}

// TestSplitRDBStopsWhenAReaderIsGone: once a shard's reader is gone (its checking server
// refused the data or ran out of memory), the split stops at once, rather than read the
// rest of a value that may be endless.
func TestSplitRDBStopsWhenAReaderIsGone(t *testing.T) {
	const limit = 96 << 20
	// One string value of a terabyte, key "k".
	head := append([]byte("REDIS0010\x00\x01k"), 0x81)
	head = binary.BigEndian.AppendUint64(head, 1<<40)
	src := &endless{head: head, body: []byte("v"), max: limit}
	gone := errors.New("reader gone")
	outs := []io.Writer{failingWriter{err: gone}, failingWriter{err: gone}}
	err := redisdata.SplitRDB(outs, func(slot int) int { return slot * 2 / 16384 }, []io.Reader{src})
	require.ErrorIs(t, err, gone)
	require.Less(t, src.read, 8<<20, "stopped soon after the write failed")
}

// failingWriter fails every write with err.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestSplitRDBCountOverflow: a count whose product with the strings per element wraps
// around 2^64 (a hash of 2^63+1 fields, read as 2 strings) is corrupt, not a small value
// redis would read otherwise.
func TestSplitRDBCountOverflow(t *testing.T) {
	body := []byte{4, 0x01, 'h', 0x81}                  // a hash, key "h", field count:
	body = binary.BigEndian.AppendUint64(body, 1<<63+1) // 2^63+1
	body = append(body, 0x01, 'f', 0x01, 'v')
	_, err := splitFiles(t, 2, rdbOf(10, body...))
	require.ErrorIs(t, err, redisdata.ErrCorrupt)
}

// TestSlotRandomKeys: Slot agrees with a cluster node's CLUSTER KEYSLOT on random keys,
// binary ones and ones full of braces among them.
func TestSlotRandomKeys(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	node := startServer(t, "", "--cluster-enabled", "yes")
	c := node.client(0)
	defer c.Close()
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}{}{}ab\x00\xff")
	keys := make([]string, 0, 5000)
	for i := range 5000 {
		n := r.IntN(24)
		k := make([]byte, n)
		for j := range k {
			if i%2 == 0 {
				k[j] = alphabet[r.IntN(len(alphabet))]
			} else {
				k[j] = byte(r.Uint32())
			}
		}
		keys = append(keys, string(k))
	}
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.ClusterKeySlot(ctx, k)
		}
		return nil
	})
	require.NoError(t, err)
	for i, cmd := range cmds {
		want := cmd.(*redis.IntCmd).Val()
		require.EqualValues(t, want, redisdata.Slot([]byte(keys[i])), "slot of %q", keys[i])
	}
}

// splitCheck splits data for n shards and checks what any output holds when the file is
// accepted: split again, an output goes whole to its own shard (a key in another shard's
// file would be served by no node, or by the wrong one), and the other shards get what
// an empty output has (the header, the functions, the trailer).
func splitCheck(t *testing.T, data []byte) {
	const n = 3
	shardOf := func(slot int) int { return slot * n / 16384 }
	bufs, err := splitBuffers(n+1, shardOf, data)
	if err != nil {
		return
	}
	empty := bufs[n].Bytes() // the output no slot goes to
	for i := range n {
		again, err := splitBuffers(n+1, shardOf, bufs[i].Bytes())
		if err != nil {
			t.Fatalf("output %d of an accepted file does not split again: %v", i, err)
		}
		if !bytes.Equal(again[i].Bytes(), bufs[i].Bytes()) {
			t.Fatalf("output %d split again is not itself", i)
		}
		for j := range n + 1 {
			if j != i && !bytes.Equal(again[j].Bytes(), empty) {
				t.Fatalf("output %d holds keys of shard %d", i, j)
			}
		}
	}
}

// splitBuffers splits data into n buffers.
func splitBuffers(n int, shardOf func(int) int, data []byte) ([]*bytes.Buffer, error) {
	bufs := make([]*bytes.Buffer, n)
	outs := make([]io.Writer, n)
	for i := range bufs {
		bufs[i] = &bytes.Buffer{}
		outs[i] = bufs[i]
	}
	err := redisdata.SplitRDB(outs, shardOf, []io.Reader{bytes.NewReader(data)})
	return bufs, err
}

// FuzzSplitRDB: whatever the file, SplitRDB returns without a panic, and the
// outputs of a file it accepts hold the keys of their own shard only. The seed corpus is
// a real redis SAVE of every type and encoding, hand-made files, and pieces of both.
func FuzzSplitRDB(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(splitCheck)
}

// fuzzSeeds: hand-made files (hints, packed and integer keys, a function, a count of
// 2^56), a real redis SAVE of every type in its compact and its large encodings (streams
// with a consumer group and pending entries, packed and integer keys, hash tags,
// expiries, a library of functions), and that SAVE cut in the middle.
func fuzzSeeds(f *testing.F) [][]byte {
	seeds := [][]byte{
		rdbOf(10),
		rdbOf(10, 0x00, 0x01, 'k', 0x01, 'v'),
		rdbOf(10, 0xFC, 1, 2, 3, 4, 5, 6, 7, 8, 0xF9, 3, 0x00, 0xC0, 7, 0x01, 'v'),
		rdbOf(10, 0x00, 0xC3, 0x03, 0x05, 0x01, 'a', 'b', 0x20, 0x00, 0x01, 'v'),
		rdbOf(9, 0xF5, 0x02, 'l', 'b'),
		rdbOf(10, 4, 0x01, 'h', 0x81, 0x80, 0, 0, 0, 0, 0, 0, 1, 0x01, 'f', 0x01, 'v'),
	}
	s := startServer(f, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := s.client(0)
	defer c.Close()
	cmds := [][]any{
		{"set", "str", "v"}, {"set", "12345", "int"}, {"set", "-7", "int8"}, {"set", "70000", "int32"},
		{"set", string(bytes.Repeat([]byte("packed-"), 20)), string(bytes.Repeat([]byte("x"), 200))},
		{"set", "{tag}a", "1"}, {"set", "{tag}b", "2"}, {"pexpire", "{tag}b", 100000000},
		{"rpush", "list", "a", "b", 1}, {"sadd", "set", "a", "b"}, {"sadd", "iset", 1, 2, 3},
		{"zadd", "zset", 1, "a", 2.5, "b"}, {"hset", "hash", "f", "v", "g", 1},
		{"xadd", "stream", "1-1", "f", "v"}, {"xadd", "stream", "2-1", "f", "w"},
		{"xgroup", "create", "stream", "g", "0"}, {"xreadgroup", "group", "g", "c", "count", 1, "streams", "stream", ">"},
		{"function", "load", "#!lua name=seedlib\nredis.register_function('f', function() return 1 end)"},
	}
	for i := range 200 {
		cmds = append(cmds, []any{"rpush", "biglist", fmt.Sprint(i, "-", string(bytes.Repeat([]byte("y"), 100)))},
			[]any{"sadd", "bigset", fmt.Sprint("m", i)}, []any{"zadd", "bigzset", i, fmt.Sprint("m", i)},
			[]any{"hset", "bighash", fmt.Sprint("f", i), string(bytes.Repeat([]byte("z"), 80))})
	}
	for _, args := range cmds {
		require.NoError(f, c.Do(ctx, args...).Err(), "%v", args)
	}
	require.NoError(f, c.Save(ctx).Err())
	data, err := os.ReadFile(filepath.Join(s.dir, "dump.rdb"))
	require.NoError(f, err)
	return append(seeds, data, data[:len(data)/2])
}
