package redisdata_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/redisdata"
)

var allDBs = []int{0, 1, 3}

// A dataset of every type survives Snapshot → LoadRDB → CopyKeys into another server,
// key for key, in both payload forms a master uses.
func TestSnapshotLoadCopy(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	src := startServer(t, "srcpw")
	total := fill(t, src, "", 2)

	for _, diskless := range []string{"yes", "no"} {
		t.Run("diskless-"+diskless, func(t *testing.T) {
			src.do(0, "config", "set", "repl-diskless-sync", diskless)
			path := filepath.Join(t.TempDir(), "snap.rdb")
			f, err := os.Create(path)
			require.NoError(t, err)
			n, err := redisdata.Snapshot(ctx, src.endpoint(), f)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, fi.Size(), n)
			head := make([]byte, 5)
			f, err = os.Open(path)
			require.NoError(t, err)
			_, err = io.ReadFull(f, head)
			f.Close()
			require.NoError(t, err)
			require.Equal(t, "REDIS", string(head))

			tmp := t.TempDir()
			ts, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: tmp}, path)
			require.NoError(t, err)
			defer ts.Close()
			keys, err := ts.Keys(ctx)
			require.NoError(t, err)
			require.EqualValues(t, total, keys)
			mem, err := ts.UsedMemory(ctx)
			require.NoError(t, err)
			require.Greater(t, mem, int64(2<<20)) // the large values alone

			dst := startServer(t, "dstpw")
			copied, err := redisdata.CopyKeys(ctx, ts.Endpoint(), dst.endpoint(), redisdata.CopyOptions{BatchSize: 97})
			require.NoError(t, err)
			require.Equal(t, total, copied)
			requireSameData(t, src, dst, allDBs)

			require.NoError(t, ts.Close())
			entries, err := os.ReadDir(tmp)
			require.NoError(t, err)
			require.Empty(t, entries, "Close removes the server's directory")
			_, err = net.DialTimeout("tcp", ts.Addr(), time.Second)
			require.Error(t, err, "Close kills the server")
		})
	}
}

// CopyKeys straight from a live server, with and without Replace.
func TestCopyKeysReplace(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	src := startServer(t, "")
	total := fill(t, src, "", 1)
	dst := startServer(t, "dstpw", "--user", "importer", "on", ">imppw", "~*", "&*", "+@all")
	ep := redisdata.Endpoint{Addr: dst.addr, Username: "importer", Password: "imppw"}

	dst.do(5, "set", "stray", "1")
	n, err := redisdata.CopyKeys(ctx, src.endpoint(), ep, redisdata.CopyOptions{})
	require.NoError(t, err)
	require.Equal(t, total, n)
	require.Equal(t, int64(1), dst.do(5, "exists", "stray"), "without Replace other keys stay")
	requireSameData(t, src, dst, allDBs)

	n, err = redisdata.CopyKeys(ctx, src.endpoint(), ep, redisdata.CopyOptions{Replace: true})
	require.NoError(t, err)
	require.Equal(t, total, n)
	require.Equal(t, int64(0), dst.do(5, "exists", "stray"), "Replace empties the target first")
	requireSameData(t, src, dst, allDBs)

	_, err = redisdata.CopyKeys(ctx, src.endpoint(), redisdata.Endpoint{Addr: dst.addr, Password: "wrong"}, redisdata.CopyOptions{})
	require.ErrorIs(t, err, redisdata.ErrAuth)

	// Keys that expire during the copy are skipped, never restored without their TTL.
	c := src.client(0)
	p := c.Pipeline()
	for i := range 300 {
		p.Set(ctx, "short:"+strconv.Itoa(i), "v", time.Duration(1+i%40)*time.Millisecond)
	}
	_, err = p.Exec(ctx)
	require.NoError(t, err)
	c.Close()
	_, err = redisdata.CopyKeys(ctx, src.endpoint(), ep, redisdata.CopyOptions{Replace: true, BatchSize: 10})
	require.NoError(t, err)
	dc := dst.client(0)
	defer dc.Close()
	for i := range 300 {
		require.NotEqual(t, time.Duration(-1), dc.PTTL(ctx, "short:"+strconv.Itoa(i)).Val())
	}
}

func TestSnapshotErrors(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	src := startServer(t, "srcpw")
	_, err := redisdata.Snapshot(ctx, redisdata.Endpoint{Addr: src.addr, Password: "nope"}, io.Discard)
	require.ErrorIs(t, err, redisdata.ErrAuth)
	require.NotContains(t, err.Error(), "nope")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	_, err = redisdata.Snapshot(ctx, redisdata.Endpoint{Addr: addr}, io.Discard)
	require.Error(t, err)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = redisdata.Snapshot(cctx, src.endpoint(), io.Discard)
	require.ErrorIs(t, err, context.Canceled)
}

// A fake master exercises what a real one does only sometimes: keep-alives before the
// payload, an EOF mark split across writes, and a payload cut short.
func TestSnapshotPayloadForms(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	src := startServer(t, "")
	fill(t, src, "", 1)
	_, rdb := rdbFile(t, src)
	mark := strings.Repeat("0123456789", 4)

	cases := []struct {
		name    string
		head    string
		body    []byte
		wantErr bool
	}{
		{"eof-mark", "$EOF:" + mark + "\r\n", append(append([]byte{}, rdb...), mark...), false},
		{"length", "$" + strconv.Itoa(len(rdb)) + "\r\n", rdb, false},
		{"eof-mark-missing", "$EOF:" + mark + "\r\n", rdb, true},
		{"length-short", "$" + strconv.Itoa(len(rdb)+10) + "\r\n", rdb, true},
		{"not-rdb", "$5\r\n", []byte("hello"), true},
		{"error", "-ERR no thanks\r\n", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeMaster(t, func(w *bufio.Writer) {
				_, _ = w.WriteString("+FULLRESYNC " + strings.Repeat("a", 40) + " 0\r\n")
				for range 3 {
					_, _ = w.WriteString("\n")
					w.Flush()
					time.Sleep(5 * time.Millisecond)
				}
				_, _ = w.WriteString(tc.head)
				// Small uneven writes, so the mark is split across reads.
				for b := tc.body; len(b) > 0; {
					k := min(len(b), 1+len(b)%97)
					_, _ = w.Write(b[:k])
					w.Flush()
					b = b[k:]
				}
			})
			var out bytes.Buffer
			n, err := redisdata.Snapshot(ctx, redisdata.Endpoint{Addr: addr, Password: "pw"}, &out)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, len(rdb), n)
			require.True(t, bytes.Equal(rdb, out.Bytes()), "payload copied exactly")
		})
	}
}

// fakeMaster answers the replica handshake with +OK and PSYNC with serve, then closes.
// It ignores its write errors (serve may too): a write that fails shows up as the
// client's error, which is what the tests check.
func fakeMaster(t *testing.T, serve func(w *bufio.Writer)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return
		}
		r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
		for {
			args, err := readArray(r)
			if err != nil {
				return
			}
			if strings.EqualFold(args[0], "psync") {
				serve(w)
				w.Flush()
				return
			}
			_, _ = w.WriteString("+OK\r\n")
			w.Flush()
		}
	}()
	return ln.Addr().String()
}

func readArray(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || line[0] != '*' {
		return nil, errors.New("not an array")
	}
	args := make([]string, n)
	for i := range args {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:l])
	}
	return args, nil
}

// A file redis-server cannot load is ErrCorrupt, and leaves nothing behind.
func TestLoadRDBCorrupt(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	src := startServer(t, "")
	fill(t, src, "", 1)
	_, rdb := rdbFile(t, src)

	flipped := bytes.Clone(rdb)
	for i := len(flipped) / 2; i < len(flipped)/2+16; i++ {
		flipped[i] ^= 0x5a
	}
	cases := map[string][]byte{
		"truncated-half":     rdb[:len(rdb)/2],
		"truncated-checksum": rdb[:len(rdb)-8],
		"flipped-bytes":      flipped,
		"text":               []byte("this is not an RDB file\n"),
		"empty":              nil,
		"signature-only":     []byte("REDIS0010"),
		"future-rdb-version": append([]byte("REDIS0099"), rdb[9:]...),
	}
	dir := t.TempDir()
	tmp := t.TempDir()
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".rdb")
			require.NoError(t, os.WriteFile(path, body, 0o600))
			ts, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: tmp}, path)
			require.ErrorIs(t, err, redisdata.ErrCorrupt)
			require.Nil(t, ts)
			t.Log(err)
			entries, err := os.ReadDir(tmp)
			require.NoError(t, err)
			require.Empty(t, entries)
		})
	}

	_, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: tmp}, filepath.Join(dir, "missing.rdb"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NotErrorIs(t, err, redisdata.ErrCorrupt)

	_, err = redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: tmp, Binary: "/nonexistent/redis-server"}, filepath.Join(dir, "text.rdb"))
	require.Error(t, err)
	require.NotErrorIs(t, err, redisdata.ErrCorrupt)
}
