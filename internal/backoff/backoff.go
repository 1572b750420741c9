// Package backoff polls a condition with a growing pause, for the drivers' waits on
// servers that converge by themselves (a cluster's gossip).
package backoff

import (
	"context"
	"time"
)

// Until calls cond until it holds, pausing 10 ms after the first try and doubling up to
// 200 ms, for at most timeout. On timeout (or ctx's end) it returns cond's last error, or
// the context's when cond had none.
func Until(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 10 * time.Millisecond
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-time.After(wait):
			wait = min(wait*2, 200*time.Millisecond)
		}
	}
}
