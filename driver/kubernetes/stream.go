package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"

	"clouddb"
	"clouddb/redisdata"
)

var _ clouddb.StreamLoader = (*Driver)(nil)

// LoadStream replaces the database's data with that of the RDB file read from r, loaded
// as it is read into a throwaway redis-server on clouddb's machine (Config.RedisServer),
// which checks it; only once the whole file loaded and fits the memory limit is the
// database emptied and filled, as Load does.
func (d *Driver) LoadStream(ctx context.Context, in clouddb.Instance, r io.Reader) error {
	if err := d.supported(in); err != nil {
		return err
	}
	l, err := redisdata.StartLoad(ctx, redisdata.LoadConfig{Binary: d.cfg.RedisServer, TempDir: d.cfg.TempDir, MaxMemory: in.MaxMemoryBytes})
	if err != nil {
		return err
	}
	src := &sourceReader{r: r}
	_, cerr := io.CopyBuffer(l, src, make([]byte, 1<<20))
	if src.err != nil {
		l.Abort()
		return fmt.Errorf("reading the data: %w", src.err)
	}
	// A write that failed means the server stopped reading: Finish says why.
	t, err := l.Finish(ctx)
	switch {
	case errors.Is(err, redisdata.ErrOutOfMemory):
		return fmt.Errorf("%w: the data needs more memory than the limit of %d bytes allows (%v)", clouddb.ErrDataTooLarge, in.MaxMemoryBytes, err)
	case errors.Is(err, redisdata.ErrCorrupt):
		return fmt.Errorf("%w: %v", clouddb.ErrDataCorrupt, err)
	case err != nil:
		return err
	case cerr != nil:
		t.Close()
		return fmt.Errorf("loading the data: %w", cerr)
	}
	defer t.Close()
	used, err := t.UsedMemory(ctx)
	if err != nil {
		return err
	}
	if used > in.MaxMemoryBytes {
		return fmt.Errorf("%w: the data needs about %d bytes, the limit is %d", clouddb.ErrDataTooLarge, used, in.MaxMemoryBytes)
	}
	if in.OSSCluster {
		return d.loadCluster(ctx, in, []*redisdata.TempServer{t})
	}
	dst, err := d.internalEndpoint(ctx, in.DatabaseID)
	if err != nil {
		return err
	}
	if _, err := redisdata.CopyKeys(ctx, t.Endpoint(), dst, redisdata.CopyOptions{Replace: true}); err != nil {
		return fmt.Errorf("copy the data into the database: %w", err)
	}
	return nil
}

// sourceReader keeps the error of the reader it reads, to tell it from the loader's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}
