package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rlheader"
)

// This file bounds the requests waiting in queues (Config.MaxQueued).

// errQueueFull ends the wait of a request beyond Config.MaxQueued, which
// boundedWait has answered.
var errQueueFull = errors.New("gateway: too many requests waiting")

// queued reports whether some policy of pol has a queue.
func queued(pol []httplimit.Policy) bool {
	for _, p := range pol {
		if p.Queue != nil {
			return true
		}
	}
	return false
}

// writerCtx carries a request's ResponseWriter and the request to the
// Wait of its route's middleware, which is given only a context, so that
// a wait refused for MaxQueued can be answered.
type writerCtx struct {
	context.Context
	w http.ResponseWriter
	r *http.Request
}

type writerKey struct{}

func (c *writerCtx) Value(key any) any {
	if key == (writerKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// withWriter returns h with the ResponseWriter in the request's context,
// for boundedWait: the middleware of a route with a queued policy.
func withWriter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wc := &writerCtx{Context: r.Context(), w: w}
		r = r.WithContext(wc)
		wc.r = r
		h.ServeHTTP(w, r)
	})
}

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
		wait = sleep
	}
	return func(ctx context.Context, d time.Duration) error {
		if limit < 0 {
			return wait(ctx, d)
		}
		if g.queued.Add(1) > limit {
			g.queued.Add(-1)
			if wc, ok := ctx.Value(writerKey{}).(*writerCtx); ok {
				st.queueFull(wc.w, wc.r, route)
			}
			return errQueueFull
		}
		defer g.queued.Add(-1)
		return wait(ctx, d)
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// queueFull answers 503 to a request that would wait beyond MaxQueued.
func (st *state) queueFull(w http.ResponseWriter, r *http.Request, route string) {
	h := w.Header()
	h.Set("Retry-After", "1")
	h.Set("Cache-Control", "no-store")
	n := writeProblem(w, rlheader.Problem{
		Title:  "Service Unavailable",
		Status: http.StatusServiceUnavailable,
		Detail: "too many requests are waiting in queues; retry later",
	}, http.StatusServiceUnavailable)
	st.access(r, http.StatusServiceUnavailable, n, "QUEUE_FULL", []string{route})
	st.cfg.Metrics.outcome(route, "queue_full")
}
