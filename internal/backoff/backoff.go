// Package backoff is the one reconnection back-off of Sluice's remote
// stores: the connect-in-background Redis store (redisstore.Lazy) and the
// ping that waits for a PostgreSQL database started without it. It is
// shipped code, not a test helper.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package backoff

import (
	"context"
	"time"
)

// The back-off of Retry: the first retry after First, doubling up to Max;
// each attempt within Attempt, which is also how long a store's first
// connection may take at start.
const (
	Attempt = 5 * time.Second
	First   = 500 * time.Millisecond
	Max     = 30 * time.Second
)

// Retry calls try, each call within Attempt, until it returns nil (then
// Retry returns true) or ctx ends (false). After each failed call it
// waits, First the first time, doubling up to Max; with failedOnce (the
// caller has just tried) it waits before the first call too.
func Retry(ctx context.Context, failedOnce bool, try func(context.Context) error) bool {
	wait := First
	for {
		if failedOnce {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
			wait = min(2*wait, Max)
		}
		cctx, cancel := context.WithTimeout(ctx, Attempt)
		err := try(cctx)
		cancel()
		if err == nil {
			return true
		}
		failedOnce = true
	}
}
