// Package failsafe decides what a limiter does when its store fails: a
// remote store such as Redis can time out, refuse connections or vanish, and
// a rate limiter must keep answering.
//
// A Limiter wraps a primary sluice.Limiter with a per-call timeout, a circuit
// breaker and a Mode:
//
//   - Open: admit the request, as if no limit applied (Envoy's default,
//     failure_mode_deny=false);
//   - Closed: deny it, with an error wrapping ErrUnavailable so that the
//     caller can tell "over the limit" from "the limiter is down";
//   - Local: decide it on a local limiter (an in-memory store) with a
//     conservative share of the limit, such as the limit divided by the
//     number of servers, so that the fleet as a whole stays near the limit.
//
// After Threshold consecutive failures the breaker opens: the primary is not
// called at all for a back-off period, which doubles on every failed probe up
// to MaxBackoff, so a dead Redis costs no timeouts. When the period ends, one
// call probes the primary; if it succeeds, decisions go back to it by
// themselves. Errors of the primary are counted and logged at most once per
// LogInterval, with the count, never once per request.
//
// Bad input (errors matching sluice.ErrBadInput) is returned as is: it is the
// caller's fault, not the store's, and trips nothing.
package failsafe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Mode says what a Limiter does with a request while its primary fails.
type Mode uint8

const (
	// Open admits the request.
	Open Mode = iota
	// Closed denies the request and returns an error wrapping
	// ErrUnavailable.
	Closed
	// Local decides the request on the local limiter, under the limit that
	// Config.Share makes of the original.
	Local
)

// String returns "open", "closed" or "local".
func (m Mode) String() string {
	switch m {
	case Open:
		return "open"
	case Closed:
		return "closed"
	case Local:
		return "local"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode returns the Mode named s: "open", "closed" or "local".
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Open, Closed, Local} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("failsafe: unknown failure mode %q (want open, closed or local)", s)
}

// ErrUnavailable is wrapped by the error a Closed Limiter returns when its
// primary fails or its breaker is open. The Result that comes with it denies
// the request, with RetryAfter set to the back-off (while the breaker is
// open, the time until the next probe). It is sluice.ErrUnavailable, so that
// callers such as package httplimit refuse the request.
var ErrUnavailable = sluice.ErrUnavailable

// Config configures a Limiter. Only Primary is required.
type Config struct {
	// Primary is the limiter to protect, such as a redisstore.Store.
	Primary sluice.Limiter
	// Mode is what to do while Primary fails. Default Open.
	Mode Mode
	// Local decides requests in Local mode; required for it.
	Local sluice.Limiter
	// Share turns a limit into the local one in Local mode. Default: the
	// limit divided by Nodes (rate and burst, rounded down, at least 1).
	Share func(sluice.Limit) sluice.Limit
	// Nodes is the number of servers sharing the limit, for the default
	// Share. Default 1.
	Nodes int
	// Timeout bounds each call to Primary. Default 50ms.
	Timeout time.Duration
	// Threshold is how many consecutive failures open the breaker.
	// Default 3.
	Threshold int
	// Backoff is how long the breaker stays open after it opens; it doubles
	// on every failed probe up to MaxBackoff. Defaults 1s and 30s.
	Backoff, MaxBackoff time.Duration
	// Logger receives one line per LogInterval while errors occur. Default
	// slog.Default().
	Logger *slog.Logger
	// LogInterval is the least time between two error log lines.
	// Default 10s.
	LogInterval time.Duration
	// LogMode is what the log lines give as the mode: default Mode's name.
	// A caller that answers failures itself (package service, which uses
	// Closed to see every failure and then applies each rule's mode) sets
	// the mode it applies.
	LogMode string
	// Clock tells the time for the breaker; nil means the system clock.
	Clock sluice.Clock
}

// Limiter is a sluice.Limiter that keeps answering when its primary fails.
// It is safe for concurrent use.
type Limiter struct {
	cfg Config

	failures  atomic.Int64 // consecutive failures
	openUntil atomic.Int64 // Unix ns until which the breaker is open; 0 when closed
	probing   atomic.Bool  // a probe is in flight
	backoff   atomic.Int64 // the current back-off, ns

	errors   atomic.Int64 // errors since the last log line
	fallback atomic.Int64 // decisions made without the primary since the last log line
	// Totals since New, for log lines that can be compared with a metric.
	errorsTotal, fallbackTotal atomic.Int64
	logMu                      sync.Mutex
	lastLog                    time.Time
}

var (
	_ sluice.Limiter  = (*Limiter)(nil)
	_ sluice.Refunder = (*Limiter)(nil)
)

// New returns a Limiter configured by cfg.
func New(cfg Config) (*Limiter, error) {
	if cfg.Primary == nil {
		return nil, errors.New("failsafe: Config.Primary is nil")
	}
	if cfg.Mode > Local {
		return nil, fmt.Errorf("failsafe: unknown mode %v", cfg.Mode)
	}
	if cfg.Mode == Local && cfg.Local == nil {
		return nil, errors.New("failsafe: Local mode needs Config.Local")
	}
	if cfg.Nodes <= 0 {
		cfg.Nodes = 1
	}
	if cfg.Share == nil {
		n := cfg.Nodes
		cfg.Share = func(l sluice.Limit) sluice.Limit { return Split(l, n) }
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff < cfg.Backoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.Backoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = 10 * time.Second
	}
	l := &Limiter{cfg: cfg}
	l.backoff.Store(int64(cfg.Backoff))
	return l, nil
}

// Split returns lim with its rate and burst divided by n (rounded down, at
// least 1): the share of one of n servers that each enforce the limit
// alone. The period and algorithm are kept. Rounding down keeps the fleet
// under the limit, except that a rate below n still gives each server 1,
// so the fleet may then admit up to n per period.
func Split(lim sluice.Limit, n int) sluice.Limit {
	if n <= 1 {
		return lim
	}
	lim.Rate = max(lim.Rate/n, 1)
	lim.Burst = max(lim.Burst/n, 1)
	return lim
}

func (l *Limiter) now() time.Time {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now()
	}
	return time.Now()
}

// Allow is shorthand for AllowN(ctx, key, lim, 1).
func (l *Limiter) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return l.AllowN(ctx, key, lim, 1)
}

// AllowN asks the primary, unless its breaker is open, and falls back to the
// configured Mode when the primary fails or is skipped.
func (l *Limiter) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	now := l.now()
	probe := false
	if until := l.openUntil.Load(); until != 0 {
		if now.UnixNano() < until || !l.probing.CompareAndSwap(false, true) {
			return l.degrade(ctx, key, lim, cost, nil)
		}
		probe = true // this call tries the primary; the others keep falling back
		defer l.probing.Store(false)
	}
	cctx, cancel := l.bound(ctx)
	res, err := l.cfg.Primary.AllowN(cctx, key, lim, cost)
	cancel()
	if err == nil {
		if probe {
			// The breaker was open: the store is back.
			l.openUntil.Store(0)
			l.backoff.Store(int64(l.cfg.Backoff))
			l.cfg.Logger.Info("failsafe: rate limit store is back")
		}
		if l.failures.Load() != 0 {
			l.failures.Store(0)
		}
		return res, nil
	}
	if errors.Is(err, sluice.ErrBadInput) {
		return res, err
	}
	if ctx.Err() != nil {
		// The caller gave up; that says nothing about the store.
		return sluice.Result{}, err
	}
	l.fail(now, probe)
	return l.degrade(ctx, key, lim, cost, err)
}

// RefundN gives units back to where they were spent: the primary while the
// breaker is closed, the local limiter while it is open in Local mode (in
// Open and Closed modes nothing was spent then). A decision made on one side
// of a breaker change and refunded on the other goes to the wrong store;
// refunds never raise a key above a fresh key's allowance, so the cost is at
// most that refund.
func (l *Limiter) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if l.openUntil.Load() == 0 {
		rf, ok := l.cfg.Primary.(sluice.Refunder)
		if !ok {
			return nil
		}
		cctx, cancel := l.bound(ctx)
		defer cancel()
		return rf.RefundN(cctx, key, lim, cost)
	}
	if rf, ok := l.cfg.Local.(sluice.Refunder); ok && l.cfg.Mode == Local {
		share := l.cfg.Share(lim)
		return rf.RefundN(ctx, key, share, min(cost, share.Capacity()))
	}
	return nil
}

// bound returns ctx bounded by the per-call timeout. When ctx's own
// deadline comes first, a context.WithTimeout would behave as ctx itself,
// so ctx is returned as is, saving its allocations and timer: the common
// case behind a gRPC server, whose clients (Envoy) send a deadline shorter
// than the default timeout.
func (l *Limiter) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= l.cfg.Timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.cfg.Timeout)
}

// fail records a failure and opens the breaker when there are enough.
func (l *Limiter) fail(now time.Time, probe bool) {
	n := l.failures.Add(1)
	switch {
	case probe:
		b := min(2*time.Duration(l.backoff.Load()), l.cfg.MaxBackoff)
		l.backoff.Store(int64(b))
		l.openUntil.Store(now.Add(b).UnixNano())
	case n >= int64(l.cfg.Threshold) && l.openUntil.Load() == 0:
		l.openUntil.Store(now.Add(time.Duration(l.backoff.Load())).UnixNano())
	}
}

// degrade answers without the primary, as the Mode says. cause is the
// primary's error, or nil when the breaker skipped it.
func (l *Limiter) degrade(ctx context.Context, key string, lim sluice.Limit, cost int, cause error) (sluice.Result, error) {
	if cause != nil {
		l.errors.Add(1)
		l.errorsTotal.Add(1)
	}
	l.fallback.Add(1)
	l.fallbackTotal.Add(1)
	l.maybeLog(cause)
	switch l.cfg.Mode {
	case Closed:
		retry := time.Duration(l.backoff.Load())
		if until, now := l.openUntil.Load(), l.now().UnixNano(); until != 0 && until > now {
			retry = time.Duration(until - now)
		}
		if cause == nil {
			cause = errors.New("circuit open")
		}
		return sluice.Result{RetryAfter: retry}, fmt.Errorf("%w: %w", ErrUnavailable, cause)
	case Local:
		share := l.cfg.Share(lim)
		if cost > share.Capacity() {
			// The whole limit would admit it, this server's share never
			// can: a denial, not bad input.
			return sluice.Result{RetryAfter: time.Duration(l.backoff.Load())}, nil
		}
		return l.cfg.Local.AllowN(ctx, key, share, cost)
	default: // Open: admitted; the allowance is unknown, so report it untouched
		return sluice.Result{Allowed: true, Remaining: max(lim.Capacity()-cost, 0)}, nil
	}
}

// maybeLog writes one line per LogInterval while the primary fails: the
// mode, the primary's errors and the decisions made without it (both
// since the previous line and since New; a decision skipped by the open
// breaker is a fallback decision, not an error), whether the breaker is
// open, the last error and when the next probe is due.
func (l *Limiter) maybeLog(cause error) {
	if !l.logMu.TryLock() {
		return
	}
	defer l.logMu.Unlock()
	now := l.now()
	if now.Sub(l.lastLog) < l.cfg.LogInterval {
		return
	}
	l.lastLog = now
	errs, fb := l.errors.Swap(0), l.fallback.Swap(0)
	mode := l.cfg.LogMode
	if mode == "" {
		mode = l.cfg.Mode.String()
	}
	breaker := "closed"
	until := l.openUntil.Load()
	if until != 0 {
		breaker = "open"
	}
	attrs := []any{"mode", mode, "breaker", breaker,
		"errors", errs, "fallback_decisions", fb,
		"errors_total", l.errorsTotal.Load(), "fallback_decisions_total", l.fallbackTotal.Load()}
	if cause != nil {
		attrs = append(attrs, "last_error", cause.Error())
	}
	if until != 0 {
		attrs = append(attrs, "retry_at", time.Unix(0, until).UTC())
	}
	l.cfg.Logger.Warn("failsafe: rate limit store failing", attrs...)
}

// Available reports whether the breaker is closed: the primary is being
// asked.
func (l *Limiter) Available() bool { return l.openUntil.Load() == 0 }
