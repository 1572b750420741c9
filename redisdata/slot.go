package redisdata

import (
	"bytes"
	"fmt"
)

// Slot is the Redis Cluster hash slot of key: CRC-16 (XMODEM) of its hash tag, the part
// between its first '{' and the first '}' after it when that is not empty, else of the
// whole key, modulo 16384. (go-redis computes the same, but not in its exported API.)
func Slot(key []byte) int {
	if i := bytes.IndexByte(key, '{'); i >= 0 {
		if j := bytes.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) & 16383)
}

// crc16Table is CRC-16/XMODEM's (polynomial 0x1021), the one Redis Cluster hashes with.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(p []byte) uint16 {
	var c uint16
	for _, b := range p {
		c = c<<8 ^ crc16Table[byte(c>>8)^b]
	}
	return c
}

// lzfDecompress unpacks LZF data (how redis packs strings in RDB files) that unpacks to
// exactly n bytes. Redis' own format: a literal run is a byte 0-31 (its length - 1) and
// the bytes; a back reference is 3 bits of length (7: one more byte of it) and 13 bits of
// offset back into the output. Only keys are unpacked (to find their slot): values pass
// through packed.
func lzfDecompress(in []byte, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 32 {
			run := ctrl + 1
			if i+run > len(in) || len(out)+run > n {
				return nil, fmt.Errorf("%w: bad LZF literal", ErrCorrupt)
			}
			out = append(out, in[i:i+run]...)
			i += run
			continue
		}
		length := ctrl >> 5
		if length == 7 {
			if i >= len(in) {
				return nil, fmt.Errorf("%w: bad LZF reference", ErrCorrupt)
			}
			length += int(in[i])
			i++
		}
		if i >= len(in) {
			return nil, fmt.Errorf("%w: bad LZF reference", ErrCorrupt)
		}
		ref := len(out) - ((ctrl&0x1f)<<8 | int(in[i])) - 1
		i++
		length += 2
		if ref < 0 || len(out)+length > n {
			return nil, fmt.Errorf("%w: bad LZF reference", ErrCorrupt)
		}
		// Byte by byte: a reference may overlap what it produces.
		for k := range length {
			out = append(out, out[ref+k])
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("%w: LZF data unpacks to %d bytes, not %d", ErrCorrupt, len(out), n)
	}
	return out, nil
}
