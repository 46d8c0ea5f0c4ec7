package httplimit

import (
	"context"
	"errors"
	"net/http"

	"github.com/sluicehq/sluice"
)

// InFlight counts requests in flight per key for a ConcurrencyPolicy, for
// counts shared beyond one process (redisstore.Leases shares them through
// Redis). Slots is the in-process one.
type InFlight interface {
	// Acquire takes one of max slots of key, a policy's key as the
	// Middleware scopes it ("<policy>:<key>", or "<policy>:" for a policy
	// without Key). When ok, release gives the slot back and is called
	// exactly once, when the request ends. ok is false when all max slots
	// are held. A non-nil err means the count could not be taken; the
	// Middleware then admits the request (fails open), unless err is
	// sluice.ErrUnavailable (refused with ConcurrencyStatusCode) or
	// Config.StoreErrorStatus is set (refused with it).
	Acquire(ctx context.Context, key string, max int) (release func(), ok bool, err error)
}

var _ InFlight = (*Slots)(nil)

// Acquire takes one of max slots of key in this process; it never fails.
// The Middleware takes a Slots' slots without this method's closure.
func (s *Slots) Acquire(_ context.Context, key string, max int) (release func(), ok bool, err error) {
	if !s.take(key, max) {
		return nil, false, nil
	}
	return func() { s.give(key) }, true, nil
}

// take counts one more request of key if fewer than max are in flight.
func (s *Slots) take(key string, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[key] >= max {
		return false
	}
	if s.inflight == nil {
		s.inflight = map[string]int{}
	}
	s.inflight[key]++
	return true
}

// give counts one request of key fewer.
func (s *Slots) give(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.inflight[key]; n <= 1 {
		delete(s.inflight, key)
	} else {
		s.inflight[key] = n - 1
	}
}

// acquireShared takes a slot of c's InFlight for key. It returns the
// release to run when the request ends (nil when none was taken) and
// whether to go on; when it returns false it has answered the request.
func (m *Middleware) acquireShared(w http.ResponseWriter, r *http.Request, c *concurrency, key string, decisions []decision) (func(), bool) {
	shared := key
	if shared == "" {
		shared = c.group // one group: scoped by name in a shared count
	}
	release, ok, err := c.InFlight.Acquire(r.Context(), shared, c.Max)
	if err != nil {
		return nil, m.inflightFailed(w, r, c, decisions, err)
	}
	if ok {
		return release, true
	}
	return nil, m.slotRefused(w, r, c, key, decisions)
}

// inflightFailed counts and logs a failing InFlight and applies the
// failure policy: a count that fails closed (sluice.ErrUnavailable) refuses
// with ConcurrencyStatusCode, StoreErrorStatus refuses with it, else the
// request goes on without a slot. It reports whether to go on.
func (m *Middleware) inflightFailed(w http.ResponseWriter, r *http.Request, c *concurrency, decisions []decision, err error) bool {
	m.cfg.Metrics.storeError(c.Name)
	m.cfg.Logger.Warn("httplimit: in-flight count failed", "policy", c.Name, "err", err)
	switch {
	case errors.Is(err, sluice.ErrUnavailable):
		m.concurrencyRefused(w, r, c, decisions)
	case m.cfg.StoreErrorStatus != 0:
		m.giveBack(r.Context(), decisions)
		m.clearHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-store")
		m.fail(w, r, m.cfg.StoreErrorStatus, "in-flight count unavailable", c.Name)
	default:
		return true
	}
	return false
}
