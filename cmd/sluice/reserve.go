package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// releaseTimeout bounds the refund of the reservations at shutdown, which
// runs after the drain.
const releaseTimeout = 5 * time.Second

// releaseWorkers is how many refunds of the reservations run at once at
// shutdown.
const releaseWorkers = 8

// maxHeldKeys bounds the keys whose reservations are tracked for the
// refund at shutdown; past it, a new key's reservation is not tracked (its
// units come back only when the Batcher gives them back, or at the end of
// their window), and the log says so at shutdown.
const maxHeldKeys = 200_000

// wrapRemote puts, from the store out, the reservations (-reserve-units:
// relief.Batcher, whose units left at shutdown are refunded before the
// store closes), the local share (-local-share: relief.Hybrid with a
// memory store) and the over-limit cache (-local-cache) in front of st.
func (r *remoteOptions) wrapRemote(st openedStore, localCache bool, log *slog.Logger) openedStore {
	lim, closeStore := st.limiter, st.close
	var res *reservations
	if r.reserveUnits > 0 {
		res = newReservations(lim, relief.BatchConfig{Batch: r.reserveUnits, Hold: r.reserveHold}, nil)
		lim = res
	}
	var local *memstore.Store
	if r.localShare > 0 {
		local = memstore.New(memstore.Config{})
		lim = relief.NewHybrid(local, lim, localShare(r.localShare))
	}
	if localCache {
		// Denials only, so no accuracy is lost (see package relief).
		lim = relief.NewOverLimitCache(lim, relief.CacheConfig{})
	}
	st.limiter = lim
	st.close = func() {
		if res != nil {
			ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			res.release(ctx, log)
			cancel()
		}
		if local != nil {
			local.Close()
		}
		closeStore()
	}
	return st
}

// localShare returns -local-share's share of a limit: 1/n of its rate
// (and of its burst, for a bucket), rounded up, so never below 1.
func localShare(n int) func(sluice.Limit) sluice.Limit {
	return func(l sluice.Limit) sluice.Limit {
		l.Rate = (l.Rate + n - 1) / n
		if l.Algorithm.UsesBurst() {
			l.Burst = (l.Burst + n - 1) / n
		}
		return l
	}
}

// reservations is relief.Batcher in front of a remote store, with the
// units it holds tracked so that they go back to the store at shutdown
// (release): the Batcher charges the store for a batch and spends it in
// this process, and a process that stops would otherwise leave up to B−1
// units per key charged and never spent until the period ends. It is safe
// for concurrent use.
type reservations struct {
	b     *relief.Batcher
	held  *heldUnits
	store sluice.Limiter
	done  atomic.Bool // released: decisions go to the store directly
}

var (
	_ sluice.Limiter        = (*reservations)(nil)
	_ sluice.Refunder       = (*reservations)(nil)
	_ sluice.Peeker         = (*reservations)(nil)
	_ sluice.LimitValidator = (*reservations)(nil)
)

// newReservations returns store behind a relief.Batcher of cfg. clock nil
// is the system clock (it must be cfg.Clock's).
func newReservations(store sluice.Limiter, cfg relief.BatchConfig, clock sluice.Clock) *reservations {
	h := &heldUnits{store: store, clock: clock, m: map[heldKey]*heldEntry{}}
	return &reservations{b: relief.NewBatcher(h, cfg), held: h, store: store}
}

// Allow is AllowN with cost 1.
func (r *reservations) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return r.AllowN(ctx, key, lim, 1)
}

// AllowN decides through the Batcher; what it admits is no longer held.
// After release, it asks the store directly.
func (r *reservations) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if r.done.Load() {
		return r.store.AllowN(ctx, key, lim, cost)
	}
	res, err := r.b.AllowN(ctx, key, lim, cost)
	if err == nil && res.Allowed {
		r.held.spent(key, lim, cost)
	}
	return res, err
}

// RefundN gives admitted units back to the store itself: they were spent,
// not held.
func (r *reservations) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if rf, ok := r.store.(sluice.Refunder); ok {
		return rf.RefundN(ctx, key, lim, cost)
	}
	return nil
}

// Peek is the Batcher's Peek (the store's state).
func (r *reservations) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return r.b.Peek(ctx, key, lim)
}

// ValidateLimit is the store's.
func (r *reservations) ValidateLimit(lim sluice.Limit) error { return r.b.ValidateLimit(lim) }

// release stops reserving and refunds to the store every unit held (for a
// fixed window, only those of windows that have not ended: the units of an
// ended window are spent there), releaseWorkers at a time, until ctx ends.
// It logs what it gave back and what it could not.
func (r *reservations) release(ctx context.Context, log *slog.Logger) {
	r.done.Store(true)
	list, untracked := r.held.takeAll()
	var units, failed atomic.Int64
	defer func() {
		log.Info("reservations refunded at shutdown", "units", units.Load(), "keys", len(list), "units_not_refunded", failed.Load(), "untracked", untracked)
	}()
	rf, ok := r.store.(sluice.Refunder)
	if !ok || len(list) == 0 {
		return
	}
	work := make(chan heldRefund)
	var wg sync.WaitGroup
	for range min(releaseWorkers, len(list)) {
		wg.Go(func() {
			for h := range work {
				if err := rf.RefundN(ctx, h.key, h.lim, h.units); err != nil {
					failed.Add(int64(h.units))
					continue
				}
				units.Add(int64(h.units))
			}
		})
	}
	for _, h := range list {
		work <- h
	}
	close(work)
	wg.Wait()
}

// heldKey is a key and its limit: the Batcher's reservations are per both.
type heldKey struct {
	key string
	lim sluice.Limit
}

// heldEntry is the units the store was charged for a key and not spent.
type heldEntry struct {
	units int
	end   time.Time // for a fixed window, the end of the window charged; else zero
}

// heldRefund is a refund release makes.
type heldRefund struct {
	heldKey
	units int
}

// heldUnits is the store as the Batcher sees it: each unit charged (a
// reservation) is counted as held until reservations.AllowN admits a
// request with it or the Batcher gives it back (RefundN). Refunds of a
// fixed window's units after the window ended are dropped: those units
// were charged in a window that is over, and refunding them would count
// them off the next one.
type heldUnits struct {
	store sluice.Limiter
	clock sluice.Clock

	mu        sync.Mutex
	m         map[heldKey]*heldEntry
	untracked int // reservations not tracked for want of room
}

func (h *heldUnits) now() time.Time {
	if h.clock == nil {
		return time.Now()
	}
	return h.clock.Now()
}

// Allow is AllowN with cost 1.
func (h *heldUnits) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return h.AllowN(ctx, key, lim, 1)
}

// AllowN charges the store and counts what it admits as held.
func (h *heldUnits) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	res, err := h.store.AllowN(ctx, key, lim, cost)
	if err != nil || !res.Allowed {
		return res, err
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	k := heldKey{key, lim}
	e := h.m[k]
	if e == nil {
		if len(h.m) >= maxHeldKeys {
			h.sweep(now)
		}
		if len(h.m) >= maxHeldKeys {
			h.untracked++
			return res, nil
		}
		e = &heldEntry{}
		h.m[k] = e
	}
	if lim.Algorithm == sluice.FixedWindow {
		if !e.end.IsZero() && !now.Before(e.end) {
			e.units = 0 // the units of an ended window are spent there
		}
		e.end = now.Add(res.ResetAfter)
	}
	e.units += cost
	return res, nil
}

// spent records that cost units of key were admitted: no longer held.
func (h *heldUnits) spent(key string, lim sluice.Limit, cost int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.takeLocked(heldKey{key, lim}, cost)
}

// takeLocked removes up to n units from k's entry, dropping it when
// empty, and returns how many it removed. h.mu is held.
func (h *heldUnits) takeLocked(k heldKey, n int) int {
	e := h.m[k]
	if e == nil {
		return 0
	}
	n = min(n, e.units)
	e.units -= n
	if e.units == 0 {
		delete(h.m, k)
	}
	return n
}

// RefundN is the Batcher giving units back: to the store, unless they are
// a fixed window's whose window has ended.
func (h *heldUnits) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	k := heldKey{key, lim}
	h.mu.Lock()
	if e := h.m[k]; e != nil && lim.Algorithm == sluice.FixedWindow && !h.now().Before(e.end) {
		delete(h.m, k)
		h.mu.Unlock()
		return nil
	}
	h.takeLocked(k, cost)
	h.mu.Unlock()
	rf, ok := h.store.(sluice.Refunder)
	if !ok {
		return nil
	}
	return rf.RefundN(ctx, key, lim, cost)
}

// Peek is the store's, when it has one.
func (h *heldUnits) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	if p, ok := h.store.(sluice.Peeker); ok {
		return p.Peek(ctx, key, lim)
	}
	return sluice.Result{}, fmt.Errorf("%T cannot peek: %w", h.store, errors.ErrUnsupported)
}

// ValidateLimit is the store's, when it has one.
func (h *heldUnits) ValidateLimit(lim sluice.Limit) error {
	if v, ok := h.store.(sluice.LimitValidator); ok {
		return v.ValidateLimit(lim)
	}
	return lim.Validate()
}

// sweep drops the fixed-window entries whose window has ended. h.mu is
// held.
func (h *heldUnits) sweep(now time.Time) {
	for k, e := range h.m {
		if !e.end.IsZero() && !now.Before(e.end) {
			delete(h.m, k)
		}
	}
}

// takeAll empties h and returns the refunds release makes: every entry
// but those of ended fixed windows; and the reservations not tracked.
func (h *heldUnits) takeAll() ([]heldRefund, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	var out []heldRefund
	for k, e := range h.m {
		if e.units > 0 && (e.end.IsZero() || now.Before(e.end)) {
			out = append(out, heldRefund{k, e.units})
		}
	}
	clear(h.m)
	return out, h.untracked
}
