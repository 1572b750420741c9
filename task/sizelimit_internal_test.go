package task

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestSizeLimit: an import's part of exactly the download limit reads whole; one byte
// more fails with ErrDataTooLarge naming the part, however the source splits its reads;
// the source's own error comes through.
func TestSizeLimit(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 1000)
	for name, r := range map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(data) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
	} {
		got, err := io.ReadAll(newSizeLimit(r(), 1000, 2))
		require.NoError(t, err, name)
		require.Len(t, got, 1000, name)

		_, err = io.ReadAll(newSizeLimit(r(), 999, 2))
		require.ErrorIs(t, err, clouddb.ErrDataTooLarge, name)
		require.ErrorContains(t, err, "importFromUri[2] is larger than 999 bytes", name)
	}
	_, err := io.ReadAll(newSizeLimit(iotest.ErrReader(io.ErrUnexpectedEOF), 10, 0))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}
