package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// This file bounds the requests waiting in queues (Config.MaxQueued).

// errQueueFull ends the wait of a request beyond Config.MaxQueued, which
// boundedWait has answered.
var errQueueFull = errors.New("gateway: too many requests waiting")

// writerKey is the context key under which match stores a request's
// *sendWriter, whose req is the request as routed: boundedWait is given
// only a context, and answers a request it refuses.
type writerKey struct{}

// boundedWait returns the Wait of route's middleware: Config.Wait (or a
// timer), for at most Config.MaxQueued requests at once over the whole
// Gateway (kept across Update). A request beyond them is answered 503 and
// its wait fails, so that the middleware gives back what it charged.
func (g *Gateway) boundedWait(st *state, route string) func(context.Context, time.Duration) error {
	limit := int64(st.cfg.MaxQueued)
	if limit == 0 {
		limit = DefaultMaxQueued
	}
	wait := st.cfg.Wait
	if wait == nil {
		wait = httplimit.Sleep
	}
	if limit < 0 {
		return wait
	}
	return func(ctx context.Context, d time.Duration) error {
		if g.queued.Add(1) > limit {
			g.queued.Add(-1)
			sw, ok := ctx.Value(writerKey{}).(*sendWriter)
			if !ok || sw.req == nil {
				return wait(ctx, d) // unreachable: match stores it; never leave a request unanswered
			}
			st.queueFull(sw, sw.req, route)
			return errQueueFull
		}
		defer g.queued.Add(-1)
		return wait(ctx, d)
	}
}

// queueFull answers 503 to a request that would wait beyond MaxQueued.
func (st *state) queueFull(w http.ResponseWriter, r *http.Request, route string) {
	st.unavailable(w, r, route, "too many requests are waiting in queues; retry later", "QUEUE_FULL", route, "queue_full")
}
