package redisdata

import (
	"context"
	"sync"
	"time"
)

// queue holds the commands read from a master until they are applied to the target. It
// decouples the two so that the link is read at network speed while the target is slow
// or still receiving the RDB (a master drops a replica whose output buffer grows past its
// limits), and bounds that buffering at max bytes, after which the reader waits and the
// master buffers instead.
type queue struct {
	mu    sync.Mutex
	items []command
	bytes int64
	max   int64
	done  bool
	err   error
	ready chan struct{} // signalled when items arrive or the queue is closed
	space chan struct{} // signalled when items leave
}

func newQueue(max int64) *queue {
	return &queue{max: max, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push appends c, waiting while the queue is full. A command larger than max is still
// taken when the queue is empty, so no command can block the stream for ever.
func (q *queue) push(ctx context.Context, c command) error {
	for {
		q.mu.Lock()
		if q.bytes < q.max || len(q.items) == 0 {
			q.items = append(q.items, c)
			q.bytes += c.size
			q.mu.Unlock()
			signal(q.ready)
			return nil
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close marks the end of the stream; pop returns err once the queue is drained.
func (q *queue) close(err error) {
	q.mu.Lock()
	if !q.done {
		q.done, q.err = true, err
	}
	q.mu.Unlock()
	signal(q.ready)
}

// pop returns up to n commands, waiting for at least one, or nothing after idle without
// any; after close it drains what is left, then returns the error given to close.
func (q *queue) pop(ctx context.Context, n int, idle time.Duration) ([]command, error) {
	var timeout <-chan time.Time
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			k := min(n, len(q.items))
			out := make([]command, k)
			copy(out, q.items)
			clear(q.items[:k])
			q.items = q.items[k:]
			for _, c := range out {
				q.bytes -= c.size
			}
			q.mu.Unlock()
			signal(q.space)
			return out, nil
		}
		if q.done {
			err := q.err
			q.mu.Unlock()
			return nil, err
		}
		q.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(idle)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-q.ready:
		case <-timeout:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
