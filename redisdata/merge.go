package redisdata

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"math/bits"
	"os"
	"strconv"
	"sync"
)

// An RDB file is "REDIS" and a four-digit version, a body of opcodes (auxiliary fields,
// SELECTDB, keys, functions), the EOF opcode, and from version 5 on a CRC-64 of
// everything before it (0 when the server saved without checksums). Bodies of several
// files, one after the other, read as one body: a loader takes each opcode as it comes.
const (
	rdbHeaderLen = len("REDIS") + 4
	rdbEOF       = 0xFF
	// rdbSelectDB is the SELECTDB opcode; a length (0: one byte, 0) follows.
	rdbSelectDB = 0xFE
	// rdbTrailerLen is the EOF opcode and the checksum.
	rdbTrailerLen = 1 + 8
	// rdbFirstChecksummed is the first version that ends with a checksum.
	rdbFirstChecksummed = 5
)

// ErrNotMergeable is returned by MergeRDB for a part it cannot join to others: one
// without the trailer of a version 5+ file. Callers load the parts one by one instead,
// which gives the server's own verdict on such a file.
var ErrNotMergeable = errors.New("RDB part cannot be merged")

// crcTables are redis' CRC-64 (Jones polynomial, reflected, initial value 0, no final
// inversion) for slicing by 8: eight bytes per step. Go's hash/crc64 slices only for its
// two predefined polynomials and goes a byte at a time for any other, some 400 MB/s:
// most of the time an import spent outside the server.
var crcTables = sync.OnceValue(func() *[8][256]uint64 {
	var t [8][256]uint64
	t[0] = *crc64.MakeTable(bits.Reverse64(0xad93d23594c935a9))
	for i := range 256 {
		c := t[0][i]
		for j := 1; j < 8; j++ {
			c = t[0][c&0xff] ^ c>>8
			t[j][i] = c
		}
	}
	return &t
})

// rdbCRC continues redis' CRC-64 crc over p.
func rdbCRC(crc uint64, p []byte) uint64 {
	t := crcTables()
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint64(p)
		crc = t[7][crc&0xff] ^ t[6][crc>>8&0xff] ^ t[5][crc>>16&0xff] ^ t[4][crc>>24&0xff] ^
			t[3][crc>>32&0xff] ^ t[2][crc>>40&0xff] ^ t[1][crc>>48&0xff] ^ t[0][crc>>56]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return crc
}

// crcWriter computes rdbCRC over what passes through it.
type crcWriter struct {
	w   io.Writer
	crc uint64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = rdbCRC(c.crc, p[:n])
	return n, err
}

// MergeRDB writes to dst one RDB file holding the data of every part, in order: the
// header of the newest part's version, each part's body, the EOF opcode and the checksum
// of the whole. Each part's own checksum is verified first (a corrupt part must not be
// blessed with a new one); a part saved without checksums stays unchecked, as redis
// leaves it. A key present in two parts makes the merged file one that redis refuses
// to load ("duplicated key"): callers that allow later parts to overwrite earlier ones
// load the parts one by one when the merged file fails. Errors about a part's content
// wrap ErrCorrupt or ErrNotMergeable.
func MergeRDB(dst io.Writer, parts []string) error {
	version := 0
	sizes := make([]int64, len(parts))
	for i, p := range parts {
		v, size, err := checkPart(p)
		if err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
		version, sizes[i] = max(version, v), size
	}
	bw := bufio.NewWriterSize(dst, 1<<20)
	cw := &crcWriter{w: bw}
	if _, err := fmt.Fprintf(cw, "REDIS%04d", version); err != nil {
		return err
	}
	for i, p := range parts {
		if i > 0 {
			// A part's keys before its first SELECTDB are database 0's, as when it
			// loads alone: not those of the database the part before it ended in.
			if _, err := cw.Write([]byte{rdbSelectDB, 0}); err != nil {
				return err
			}
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = f.Seek(int64(rdbHeaderLen), io.SeekStart)
		if err == nil {
			_, err = io.CopyN(cw, f, sizes[i]-int64(rdbHeaderLen+rdbTrailerLen))
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
	}
	if _, err := cw.Write([]byte{rdbEOF}); err != nil {
		return err
	}
	var sum [8]byte
	binary.LittleEndian.PutUint64(sum[:], cw.crc)
	if _, err := bw.Write(sum[:]); err != nil {
		return err
	}
	return bw.Flush()
}

// checkPart reads an RDB part's version and size and verifies its checksum.
func checkPart(path string) (version int, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = fi.Size()
	if size < int64(rdbHeaderLen+rdbTrailerLen) {
		return 0, 0, fmt.Errorf("%w: %d bytes is too short for an RDB file", ErrCorrupt, size)
	}
	var head [rdbHeaderLen]byte
	if _, err = io.ReadFull(f, head[:]); err != nil {
		return 0, 0, err
	}
	if !bytes.HasPrefix(head[:], rdbMagic) {
		return 0, 0, fmt.Errorf("%w: wrong signature", ErrCorrupt)
	}
	version, err = strconv.Atoi(string(head[len(rdbMagic):]))
	if err != nil || version < 1 {
		return 0, 0, fmt.Errorf("%w: bad version %q", ErrCorrupt, head[len(rdbMagic):])
	}
	if version < rdbFirstChecksummed {
		return 0, 0, fmt.Errorf("%w: version %d has no checksum trailer", ErrNotMergeable, version)
	}
	var trailer [rdbTrailerLen]byte
	if _, err := f.ReadAt(trailer[:], size-rdbTrailerLen); err != nil {
		return 0, 0, err
	}
	if trailer[0] != rdbEOF {
		return 0, 0, fmt.Errorf("%w: no EOF opcode before the checksum", ErrNotMergeable)
	}
	want := binary.LittleEndian.Uint64(trailer[1:])
	if want == 0 {
		return version, size, nil // saved with rdbchecksum no
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	cw := &crcWriter{w: io.Discard}
	if _, err := io.CopyN(cw, bufio.NewReaderSize(f, 1<<20), size-8); err != nil {
		return 0, 0, err
	}
	if cw.crc != want {
		return 0, 0, fmt.Errorf("%w: wrong RDB checksum", ErrCorrupt)
	}
	return version, size, nil
}
