package redisdata

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// SplitRDB reads RDB files, the parts of one data set, and writes to outs[i] an RDB file
// holding the keys that shard i of a Redis Cluster serves (shardOf names the shard of a
// hash slot), each key's bytes as they came, with its expiry and its LRU/LFU hints.
// Functions go to every shard (each node of a cluster keeps its own), each library once. A cluster has one
// logical database: a key of another one is an error.
//
// It reads each part once, as it arrives, and checks its CRC-64 at its end: the outputs
// are written as the parts are read, and only when every part has been read whole and
// checked do they get their EOF opcode and checksum. A caller that gets an error must
// treat what the outputs received as void (a server reading one sees it cut short).
//
// It does not look inside values: a value's bounds are read from its encoding's
// lengths, and the server that loads an output checks its content (sanitize-dump-payload).
// An encoding it does not know (a module's value, a newer Redis' type), parts of different
// RDB versions, a key longer than maxSplitKey, a library of functions longer than
// maxSplitFunction or more than maxSplitHints bytes of hints before a key (what it holds
// in memory is bounded) return an error wrapping ErrNotSplittable: such data takes the
// key-by-key path. Once a write to an output fails it stops, with that error. Errors about the data's form wrap ErrCorrupt.
func SplitRDB(outs []io.Writer, shardOf func(slot int) int, parts []io.Reader) error {
	sp := &splitter{shardOf: shardOf, outs: make([]*splitOut, len(outs)), funcs: map[[sha256.Size]byte]bool{}}
	for i, w := range outs {
		bw := bufio.NewWriterSize(w, 64<<10)
		sp.outs[i] = &splitOut{bw: bw, cw: &crcWriter{w: bw}}
	}
	for i, p := range parts {
		if err := sp.part(p, i == 0); err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
	}
	for _, o := range sp.outs {
		if err := o.finish(); err != nil {
			return err
		}
	}
	return nil
}

// ErrNotSplittable: SplitRDB cannot split the data; see SplitRDB.
var ErrNotSplittable = errors.New("RDB data cannot be split by slot")

// ErrOtherDatabase: SplitRDB met keys of a logical database other than 0, which a cluster
// does not have.
var ErrOtherDatabase = errors.New("the data has keys in a logical database other than 0")

// maxSplitKey bounds the key SplitRDB holds in memory to find its slot (a value is never
// held: it streams through). Keys this long are rare; a longer one takes the key-by-key
// path, whose throwaway server holds it under the database's memory limit.
const maxSplitKey = 1 << 20

// maxSplitFunction bounds a library of functions, which SplitRDB holds whole (each shard
// gets it, each once); a larger one takes the key-by-key path (see SplitRDB).
const maxSplitFunction = 16 << 20

// maxSplitHints bounds the bytes of the opcodes before an entry's type (its expiry, its
// LRU or LFU hint: redis writes 19 at most), which SplitRDB holds until the key says
// where they go. Redis reads any number of them, each replacing the last: a file that
// repeats them without end would otherwise be held whole.
const maxSplitHints = 64

// The RDB opcodes and value types SplitRDB reads (redis' rdb.h).
const (
	opFunction2    = 0xF5
	opFunctionPre  = 0xF6
	opModuleAux    = 0xF7
	opIdle         = 0xF8
	opFreq         = 0xF9
	opAux          = 0xFA
	opResizeDB     = 0xFB
	opExpireTimeMs = 0xFC
	opExpireTime   = 0xFD

	typeString          = 0
	typeList            = 1
	typeSet             = 2
	typeZSet            = 3
	typeHash            = 4
	typeZSet2           = 5
	typeHashZipmap      = 9
	typeListZiplist     = 10
	typeSetIntset       = 11
	typeZSetZiplist     = 12
	typeHashZiplist     = 13
	typeListQuicklist   = 14
	typeStreamListpacks = 15
	typeHashListpack    = 16
	typeZSetListpack    = 17
	typeListQuicklist2  = 18
	typeStreamListpack2 = 19
	typeSetListpack     = 20
	typeStreamListpack3 = 21
)

// splitOut is one shard's output file.
type splitOut struct {
	bw *bufio.Writer
	cw *crcWriter // over bw: the checksum of what the file holds
}

func (o *splitOut) finish() error {
	if _, err := o.cw.Write([]byte{rdbEOF}); err != nil {
		return err
	}
	var sum [8]byte
	binary.LittleEndian.PutUint64(sum[:], o.cw.crc)
	if _, err := o.bw.Write(sum[:]); err != nil {
		return err
	}
	return o.bw.Flush()
}

type splitter struct {
	shardOf func(slot int) int
	outs    []*splitOut
	version int

	br  *bufio.Reader
	crc uint64    // of the part, so far
	dst io.Writer // where the bytes read go, nil: nowhere
	// pre holds the bytes of the entry being read until its key says which output
	// they go to: opcodes before it (expiry, LRU/LFU), its type and its key.
	pre []byte
	// buffering: the bytes read go to pre, not dst.
	buffering bool
	werr      error                      // the first write to an output that failed
	funcs     map[[sha256.Size]byte]bool // the libraries of functions written, as read
	one       [1]byte
}

// part splits one RDB file.
func (sp *splitter) part(r io.Reader, first bool) error {
	sp.br = bufio.NewReaderSize(r, 256<<10)
	sp.crc = 0
	sp.dst = nil
	var head [rdbHeaderLen]byte
	if err := sp.full(head[:]); err != nil {
		return err
	}
	if string(head[:len(rdbMagic)]) != string(rdbMagic) {
		return fmt.Errorf("%w: wrong signature", ErrCorrupt)
	}
	version, err := strconv.Atoi(string(head[len(rdbMagic):]))
	if err != nil || version < 1 {
		return fmt.Errorf("%w: bad version %q", ErrCorrupt, head[len(rdbMagic):])
	}
	if first {
		sp.version = version
		for _, o := range sp.outs {
			if _, err := fmt.Fprintf(o.cw, "REDIS%04d", version); err != nil {
				return err
			}
		}
	} else if version != sp.version {
		return fmt.Errorf("%w: RDB version %d after a part of version %d", ErrNotSplittable, version, sp.version)
	}
	db := 0
	for {
		sp.pre = sp.pre[:0]
		sp.buffering = true
		op, err := sp.byte()
		if err != nil {
			return err
		}
		switch op {
		case rdbEOF:
			sp.buffering = false
			return sp.trailer(version)
		case rdbSelectDB:
			n, lerr := sp.length()
			if lerr != nil {
				return lerr
			}
			db = int(n)
			continue
		case opResizeDB:
			if _, err = sp.length(); err != nil {
				return err
			}
			if _, err = sp.length(); err != nil {
				return err
			}
			continue
		case opAux:
			// Auxiliary fields (the saving server's version, replication offsets) say
			// nothing about the keys, and a replication id must not travel to another
			// server: dropped.
			sp.buffering = false
			if err = sp.skipString(); err != nil {
				return err
			}
			if err = sp.skipString(); err != nil {
				return err
			}
			continue
		case opFunction2:
			// A library of functions: each shard loads it, once (every node of a
			// cluster has it, so each part of its backup does; redis refuses a file
			// that defines a library twice).
			if err = sp.skipStringMax(maxSplitFunction, "a library of functions"); err != nil {
				return err
			}
			sum := sha256.Sum256(sp.pre)
			if sp.funcs[sum] {
				continue
			}
			sp.funcs[sum] = true
			for _, o := range sp.outs {
				if _, err = o.cw.Write(sp.pre); err != nil {
					return err
				}
			}
			continue
		case opModuleAux, opFunctionPre:
			return fmt.Errorf("%w: opcode %#x (a module's data or a pre-release function)", ErrNotSplittable, op)
		}
		// An entry: its hints, its type, its key, its value.
		for {
			switch op {
			case opExpireTimeMs:
				err = sp.skip(8)
			case opExpireTime:
				err = sp.skip(4)
			case opIdle:
				_, err = sp.length()
			case opFreq:
				err = sp.skip(1)
			default:
				goto typed
			}
			if err != nil {
				return err
			}
			if len(sp.pre) > maxSplitHints {
				return fmt.Errorf("%w: more than %d bytes of expiries and LRU/LFU hints before a key", ErrNotSplittable, maxSplitHints)
			}
			if op, err = sp.byte(); err != nil {
				return err
			}
		}
	typed:
		key, err := sp.key()
		if err != nil {
			return err
		}
		if db != 0 {
			return fmt.Errorf("%w: logical database %d (a cluster has database 0 only)", ErrOtherDatabase, db)
		}
		o := sp.outs[sp.shardOf(Slot(key))]
		if _, err = o.cw.Write(sp.pre); err != nil {
			return err
		}
		sp.buffering, sp.dst = false, o.cw
		err = sp.value(op)
		sp.dst = nil
		if err != nil {
			return err
		}
		if sp.werr != nil {
			// The reader of an output is gone: splitting on is of no use.
			return sp.werr
		}
	}
}

// trailer reads the part's checksum, which covers every byte before it, and checks it.
func (sp *splitter) trailer(version int) error {
	if version < rdbFirstChecksummed {
		return nil
	}
	want := sp.crc
	var sum [8]byte
	if err := sp.full(sum[:]); err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint64(sum[:]); got != 0 && got != want {
		return fmt.Errorf("%w: wrong RDB checksum", ErrCorrupt)
	}
	return nil
}

// value reads a value of type t (its bytes go to dst).
func (sp *splitter) value(t byte) error {
	switch t {
	case typeString, typeHashZipmap, typeListZiplist, typeSetIntset, typeZSetZiplist, typeHashZiplist,
		typeHashListpack, typeZSetListpack, typeSetListpack:
		return sp.skipString()
	case typeList, typeSet, typeListQuicklist:
		return sp.strings(1)
	case typeHash:
		return sp.strings(2)
	case typeZSet, typeZSet2:
		n, err := sp.length()
		if err != nil {
			return err
		}
		for range n {
			if err = sp.skipString(); err != nil {
				return err
			}
			if t == typeZSet2 {
				err = sp.skip(8)
			} else {
				err = sp.oldDouble()
			}
			if err != nil {
				return err
			}
		}
		return nil
	case typeListQuicklist2:
		n, err := sp.length()
		if err != nil {
			return err
		}
		for range n {
			if _, err := sp.length(); err != nil { // the node's container
				return err
			}
			if err := sp.skipString(); err != nil {
				return err
			}
		}
		return nil
	case typeStreamListpacks, typeStreamListpack2, typeStreamListpack3:
		return sp.stream(t)
	}
	return fmt.Errorf("%w: value type %d", ErrNotSplittable, t)
}

// strings reads a count, then count×per strings.
func (sp *splitter) strings(per uint64) error {
	n, err := sp.length()
	if err != nil {
		return err
	}
	if n > math.MaxUint64/per {
		return fmt.Errorf("%w: a count of %d", ErrCorrupt, n)
	}
	for range n * per {
		if err := sp.skipString(); err != nil {
			return err
		}
	}
	return nil
}

// stream reads a stream: its listpacks, its metadata and its consumer groups.
func (sp *splitter) stream(t byte) error {
	if err := sp.strings(2); err != nil { // each listpack: its master ID, its entries
		return err
	}
	ids := 3 // length, last ID (ms, seq)
	if t >= typeStreamListpack2 {
		ids += 5 // first ID, max deleted ID, entries added
	}
	if err := sp.lengths(ids); err != nil {
		return err
	}
	groups, err := sp.length()
	if err != nil {
		return err
	}
	for range groups {
		if err := sp.skipString(); err != nil { // its name
			return err
		}
		ids := 2 // last delivered ID
		if t >= typeStreamListpack2 {
			ids++ // entries read
		}
		if err := sp.lengths(ids); err != nil {
			return err
		}
		pending, err := sp.length()
		if err != nil {
			return err
		}
		for range pending {
			if err = sp.skip(16 + 8); err != nil { // ID, delivery time
				return err
			}
			if _, err = sp.length(); err != nil { // delivery count
				return err
			}
		}
		consumers, err := sp.length()
		if err != nil {
			return err
		}
		for range consumers {
			if err := sp.skipString(); err != nil { // its name
				return err
			}
			times := 8 // seen time
			if t >= typeStreamListpack3 {
				times += 8 // active time
			}
			if err := sp.skip(times); err != nil {
				return err
			}
			owned, err := sp.length()
			if err != nil {
				return err
			}
			if owned > math.MaxUint64/16 {
				return fmt.Errorf("%w: a count of %d", ErrCorrupt, owned)
			}
			if err := sp.skipN(owned * 16); err != nil { // their IDs
				return err
			}
		}
	}
	return nil
}

func (sp *splitter) lengths(n int) error {
	for range n {
		if _, err := sp.length(); err != nil {
			return err
		}
	}
	return nil
}

// oldDouble reads a double of the first sorted set encoding: a length byte, or 253-255
// for NaN and the infinities, then that many characters.
func (sp *splitter) oldDouble() error {
	n, err := sp.byte()
	if err != nil {
		return err
	}
	if n >= 253 {
		return nil
	}
	return sp.skip(int(n))
}

// The encodings of a string's first byte (redis' RDB_ENC_*), after the 0b11 prefix.
const (
	encInt8  = 0
	encInt16 = 1
	encInt32 = 2
	encLZF   = 3
)

// lengthOrEncoding reads a length; encoded reports a string's special encoding instead
// (then n is one of the enc constants).
func (sp *splitter) lengthOrEncoding() (n uint64, encoded bool, err error) {
	b, err := sp.byte()
	if err != nil {
		return 0, false, err
	}
	switch b >> 6 {
	case 0:
		return uint64(b & 0x3F), false, nil
	case 1:
		var b2 byte
		b2, err = sp.byte()
		return uint64(b&0x3F)<<8 | uint64(b2), false, err
	case 3:
		return uint64(b & 0x3F), true, nil
	}
	switch b {
	case 0x80:
		var v [4]byte
		err = sp.full(v[:])
		return uint64(binary.BigEndian.Uint32(v[:])), false, err
	case 0x81:
		var v [8]byte
		err = sp.full(v[:])
		return binary.BigEndian.Uint64(v[:]), false, err
	}
	return 0, false, fmt.Errorf("%w: bad length byte %#x", ErrCorrupt, b)
}

func (sp *splitter) length() (uint64, error) {
	n, encoded, err := sp.lengthOrEncoding()
	if err == nil && encoded {
		err = fmt.Errorf("%w: an encoded string where a length belongs", ErrCorrupt)
	}
	return n, err
}

// skipString reads a string without keeping it.
func (sp *splitter) skipString() error { return sp.skipStringMax(math.MaxUint64, "") }

// skipStringMax is skipString for a string (what) of at most limit bytes as stored: a
// longer one is an error wrapping ErrNotSplittable.
func (sp *splitter) skipStringMax(limit uint64, what string) error {
	n, encoded, err := sp.lengthOrEncoding()
	if err != nil {
		return err
	}
	if !encoded && n > limit {
		return fmt.Errorf("%w: %s of %d bytes", ErrNotSplittable, what, n)
	}
	if encoded {
		switch n {
		case encInt8:
			return sp.skip(1)
		case encInt16:
			return sp.skip(2)
		case encInt32:
			return sp.skip(4)
		case encLZF:
			clen, err := sp.length()
			if err != nil {
				return err
			}
			if _, err := sp.length(); err != nil {
				return err
			}
			if clen > limit {
				return fmt.Errorf("%w: %s of %d bytes packed", ErrNotSplittable, what, clen)
			}
			return sp.skipN(clen)
		}
		return fmt.Errorf("%w: unknown string encoding %d", ErrCorrupt, n)
	}
	return sp.skipN(n)
}

// key reads a key as the string it is (an integer's decimal form, an LZF-packed key
// unpacked), for its slot.
func (sp *splitter) key() ([]byte, error) {
	n, encoded, err := sp.lengthOrEncoding()
	if err != nil {
		return nil, err
	}
	if !encoded {
		if n > maxSplitKey {
			return nil, fmt.Errorf("%w: a key of %d bytes", ErrNotSplittable, n)
		}
		return sp.bytes(int(n))
	}
	switch n {
	case encInt8:
		b, err := sp.bytes(1)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int8(b[0])), 10), nil
	case encInt16:
		b, err := sp.bytes(2)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int16(binary.LittleEndian.Uint16(b))), 10), nil
	case encInt32:
		b, err := sp.bytes(4)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int32(binary.LittleEndian.Uint32(b))), 10), nil
	case encLZF:
		clen, err := sp.length()
		if err != nil {
			return nil, err
		}
		ulen, err := sp.length()
		if err != nil {
			return nil, err
		}
		if clen > maxSplitKey || ulen > maxSplitKey {
			return nil, fmt.Errorf("%w: a key of %d bytes", ErrNotSplittable, ulen)
		}
		packed, err := sp.bytes(int(clen))
		if err != nil {
			return nil, err
		}
		return lzfDecompress(packed, int(ulen))
	}
	return nil, fmt.Errorf("%w: unknown string encoding %d", ErrCorrupt, n)
}

// bytes reads n bytes and returns them (valid until the next read).
func (sp *splitter) bytes(n int) ([]byte, error) {
	start := len(sp.pre)
	if err := sp.skip(n); err != nil {
		return nil, err
	}
	return sp.pre[start:], nil
}

// byte reads one byte.
func (sp *splitter) byte() (byte, error) {
	if sp.werr != nil {
		return 0, sp.werr
	}
	b, err := sp.br.ReadByte()
	if err != nil {
		return 0, short(err)
	}
	sp.one[0] = b
	sp.consumed(sp.one[:])
	return b, nil
}

// full reads len(p) bytes into p.
func (sp *splitter) full(p []byte) error {
	if sp.werr != nil {
		return sp.werr
	}
	if _, err := io.ReadFull(sp.br, p); err != nil {
		return short(err)
	}
	sp.consumed(p)
	return nil
}

// skip reads n bytes (a handful, or a key: n is small).
func (sp *splitter) skip(n int) error { return sp.skipN(uint64(n)) }

// skipN reads n bytes through the buffer, a chunk at a time.
// Once a write to an output failed (its reader is gone), it stops at once: the value
// being read may be endless.
func (sp *splitter) skipN(n uint64) error {
	for n > 0 {
		if sp.werr != nil {
			return sp.werr
		}
		chunk := int(min(n, uint64(sp.br.Size())))
		p, err := sp.br.Peek(chunk)
		if len(p) > 0 {
			sp.consumed(p)
			_, _ = sp.br.Discard(len(p))
			n -= uint64(len(p))
		}
		if n > 0 && err != nil {
			return short(err)
		}
	}
	return nil
}

// consumed accounts for bytes read: the part's checksum, and where they go.
func (sp *splitter) consumed(p []byte) {
	sp.crc = rdbCRC(sp.crc, p)
	switch {
	case sp.buffering:
		sp.pre = append(sp.pre, p...)
	case sp.dst != nil:
		if _, err := sp.dst.Write(p); err != nil {
			sp.werr, sp.dst = err, nil
		}
	}
}

// short turns the end of a part in the middle of its content into ErrCorrupt.
func short(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the file ends too early", ErrCorrupt)
	}
	return err
}
