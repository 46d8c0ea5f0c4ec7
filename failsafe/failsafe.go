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
//     number of servers, so that the fleet as a whole stays near the limit;
//     and, for a key the primary reported on while it answered, at most
//     that share of what it reported left (Remaining split by Nodes, until
//     its ResetAfter), so that a quota nearly spent before an outage stays
//     nearly spent. What was reported is kept in a fixed table of 4,096
//     slots per Group (32 KiB) indexed by a hash of the key: a key whose
//     slot another key took gets the share of the limit.
//
// A Group is one breaker around one primary with one Limiter per Mode, for
// a server whose rules choose their modes (package service); New makes a
// Limiter of one mode with a Group of its own. The breaker is a Breaker,
// which package client's circuit breaker uses too.
//
// After Threshold consecutive failures the breaker opens: the primary is not
// called at all for a back-off period, which doubles on every failed probe up
// to MaxBackoff, so a dead Redis costs no timeouts. When the period ends, one
// call probes the primary; if it succeeds, decisions go back to it by
// themselves. Errors of the primary are counted and logged at most once per
// LogInterval, with the count, never once per request.
//
// With Config.Partitions above 1 the breaker is partitioned by a hash of
// the key: a key whose calls fail (a hot key whose calls time out, a key of
// the wrong type) opens only its partition, and the keys of the other
// partitions keep going to the primary. A store that fails for every key
// opens partitions quickly, and once a quarter of them are open the whole
// Group's breaker opens: every key is then answered by its Mode, and one
// probe per back-off asks the primary for all of them.
//
// Bad input (errors matching sluice.ErrBadInput) is returned as is: it is the
// caller's fault, not the store's, and trips nothing.
//
// Each call to the primary gets the caller's context bounded by Timeout.
// Once the call has returned, that context may be lent to a later call, and
// then answers with that call's values, deadline and end. So a primary must
// not keep using it after it returned, nor a context derived from it
// (context.WithoutCancel's included: its values would be another request's,
// such as its trace), except one that has ended (its Err is not nil): a
// call's context that ended is never lent again, so a primary may finish,
// on it, work it started for a caller that gave up, as relief.Batcher does
// with a reservation under way. The stores of this module follow this rule.
package failsafe

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Mode says what a Limiter does with a request while its primary fails:
// sluice.FailureMode, the vocabulary's name for it.
type Mode = sluice.FailureMode

const (
	// Open admits the request.
	Open = sluice.FailOpen
	// Closed denies the request and returns an error wrapping
	// ErrUnavailable.
	Closed = sluice.FailClosed
	// Local decides the request on the local limiter, under the limit that
	// Config.Share makes of the original.
	Local = sluice.FailLocal
)

// ParseMode returns the Mode named s: "open", "closed" or "local"
// (sluice.ParseFailureMode, its error prefixed "failsafe: ").
func ParseMode(s string) (Mode, error) {
	m, err := sluice.ParseFailureMode(s)
	if err != nil {
		return 0, fmt.Errorf("failsafe: %w", err)
	}
	return m, nil
}

// ErrUnavailable is wrapped by the error a Closed Limiter returns when its
// primary fails or its breaker is open. The Result that comes with it denies
// the request, with RetryAfter set to the back-off (while the breaker is
// open, the time until the next probe). It is sluice.ErrUnavailable, so that
// callers such as package httplimit refuse the request.
var ErrUnavailable = sluice.ErrUnavailable

// errCircuitOpen is a Closed Limiter's error while the breaker skips the
// primary: the same for every call, so made once.
var errCircuitOpen = fmt.Errorf("%w: circuit open", ErrUnavailable)

// Config configures a Limiter or a Group. Only Primary is required; every
// other zero field has the default its comment gives.
type Config struct {
	// Primary is the limiter to protect, such as a redisstore.Store. The
	// context of each of its calls is the caller's, bounded by Timeout; it
	// may be reused for a later call once the call has returned, so
	// Primary must not keep using it, or a context derived from it, after
	// returning, unless it has ended (see the package documentation).
	Primary sluice.Limiter
	// Mode is what to do while Primary fails (New), or the mode the log
	// lines name (NewGroup). Default Open.
	Mode Mode
	// Local decides requests in Local mode; required for it.
	Local sluice.Limiter
	// Share turns a limit into the local one in Local mode. Default: the
	// limit divided by Nodes (rate and burst, rounded down, at least 1).
	Share func(sluice.Limit) sluice.Limit
	// Nodes is the number of servers sharing the limit, for the default
	// Share and the split of what Primary last reported left. Default 1;
	// negative is refused.
	Nodes int
	// NodesNow, when set, is read at each Local decision instead of Nodes:
	// a count that follows the fleet as it scales (relief.Fleet's Count).
	// Its answers below 1 count as 1.
	NodesNow func() int
	// Partitions is how many breakers share the keys, each key's chosen by
	// a hash of it: the failures of one key open only its partition (its
	// Threshold counts that partition's consecutive failures), and the
	// Group's breaker opens for every key when a quarter of the partitions
	// (at least one) are open. Default 1: one breaker for every key, the
	// first failures of any key counting toward it. At most 1024;
	// negative is refused.
	Partitions int
	// Timeout bounds each call to Primary. Default 50ms.
	//
	// A caller's deadline bounds the call too: Primary gets at most 9/10
	// of the time the caller has left, so that when it does not answer in
	// time the Mode's answer still reaches the caller before its deadline
	// (behind Envoy, whose deadline is 20ms, Primary gets 18ms). A call
	// that runs out of its time is a failure of Primary, as a timeout is:
	// it counts toward the breaker and the Mode answers. Two exceptions
	// say nothing about Primary, trip nothing and return the context's
	// error: a caller that cancels its context, and a caller whose
	// deadline left Primary less than Timeout/10 (an already late or
	// hostile caller, which must not open the breaker for everyone).
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
	// The log lines are the Group's, for all its modes; a caller whose
	// rules choose their own modes (package service) may name the default
	// it applies.
	LogMode string
	// Clock tells the time for the breaker; nil means the system clock.
	Clock sluice.Clock
}

// Group is one circuit breaker around one primary, shared by one Limiter
// per Mode: a server whose rules each choose their failure mode (package
// service) asks Limiter(mode) for each rule's, and every rule's failures
// count toward the same breaker, so that a dead store opens it once for all
// of them. The errors are counted and logged by the Group, once per
// LogInterval for all its Limiters.
//
// A Group is safe for concurrent use. Its zero value is not usable; make
// one with NewGroup.
type Group struct {
	cfg      Config
	breaker  *Breaker  // the whole primary's: open when quorum partitions are
	parts    []Breaker // by a hash of the key; one with Partitions 1
	seed     maphash.Seed
	quorum   int64        // open partitions that open breaker
	open     atomic.Int64 // partitions open
	limiters [Local + 1]Limiter
	learned  *learned // nil without Config.Local

	errors   atomic.Int64 // errors since the last log line
	fallback atomic.Int64 // decisions made without the primary since the last log line
	// Totals since NewGroup, for log lines that can be compared with a metric.
	errorsTotal, fallbackTotal atomic.Int64
	logMu                      sync.Mutex
	lastLog, lastBack          time.Time // of the last failing and back lines

	calls sync.Pool // *callCtx, for reuse (see callCtx)
}

// Limiter is a sluice.Limiter that keeps answering when its primary fails,
// as its Mode says. It is safe for concurrent use. Its zero value is not
// usable; make one with New, or take one from a Group.
type Limiter struct {
	g    *Group
	mode Mode
}

var (
	_ sluice.Limiter  = (*Limiter)(nil)
	_ sluice.Refunder = (*Limiter)(nil)
)

// New returns a Limiter configured by cfg: the Limiter of cfg.Mode of a
// Group of its own.
func New(cfg Config) (*Limiter, error) {
	if cfg.Mode == Local && cfg.Local == nil {
		return nil, errors.New("failsafe: Local mode needs Config.Local")
	}
	g, err := NewGroup(cfg)
	if err != nil {
		return nil, err
	}
	return g.Limiter(cfg.Mode), nil
}

// NewGroup returns a Group configured by cfg. cfg.Mode is only the mode its
// log lines name (unless LogMode is set); Config.Local is needed only by
// the Limiter of mode Local, whose fallback decisions are errors without
// it.
func NewGroup(cfg Config) (*Group, error) {
	if cfg.Primary == nil {
		return nil, errors.New("failsafe: Config.Primary is nil")
	}
	if cfg.Mode > Local {
		return nil, fmt.Errorf("failsafe: unknown mode %v", cfg.Mode)
	}
	switch {
	case cfg.Partitions > maxPartitions || cfg.Partitions < 0:
		return nil, fmt.Errorf("failsafe: Config.Partitions %d: want 0 (one) to %d", cfg.Partitions, maxPartitions)
	case cfg.Nodes < 0:
		return nil, fmt.Errorf("failsafe: Config.Nodes %d: want 0 (one) or more", cfg.Nodes)
	}
	cfg.Partitions = max(cfg.Partitions, 1)
	cfg.Nodes = max(cfg.Nodes, 1)
	if cfg.NodesNow == nil {
		n := cfg.Nodes
		cfg.NodesNow = func() int { return n }
	}
	if cfg.Share == nil {
		nodes := cfg.NodesNow
		cfg.Share = func(l sluice.Limit) sluice.Limit { return Split(l, nodes()) }
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = 10 * time.Second
	}
	if cfg.LogMode == "" {
		cfg.LogMode = cfg.Mode.String()
	}
	bc := BreakerConfig{Threshold: cfg.Threshold, Backoff: cfg.Backoff, MaxBackoff: cfg.MaxBackoff, Clock: cfg.Clock}
	g := &Group{cfg: cfg, parts: make([]Breaker, cfg.Partitions), seed: maphash.MakeSeed(),
		quorum: int64(max(cfg.Partitions/4, 1))}
	for i := range g.parts {
		g.parts[i].init(bc)
	}
	if cfg.Local != nil {
		g.learned = &learned{}
	}
	// The Group's breaker opens on the quorum-th open partition (its one
	// failure) and is closed by its own probe.
	bc.Threshold = 1
	g.breaker = NewBreaker(bc)
	for m := range g.limiters {
		g.limiters[m] = Limiter{g: g, mode: Mode(m)}
	}
	return g, nil
}

// Limiter returns the Group's Limiter of mode m; nil for an unknown mode.
func (g *Group) Limiter(m Mode) *Limiter {
	if m > Local {
		return nil
	}
	return &g.limiters[m]
}

// maxPartitions bounds Config.Partitions: a Group's partitions are a few
// dozen bytes each, made once.
const maxPartitions = 1024

// Available reports whether the Group's breaker is closed: the primary is
// being asked, for every key whose partition is closed.
func (g *Group) Available() bool { return g.breaker.Available() }

// OpenPartitions returns how many partitions of the breaker are open (see
// Config.Partitions).
func (g *Group) OpenPartitions() int { return int(g.open.Load()) }

// hash returns key's hash, which picks its partition and its slot of the
// learned table: computed once per call, and not at all (0) when the
// Group has neither more than one partition nor a learned table.
func (g *Group) hash(key string) uint64 {
	if len(g.parts) == 1 && g.learned == nil {
		return 0
	}
	return maphash.String(g.seed, key)
}

// part returns the partition of the key whose hash is h.
func (g *Group) part(h uint64) *Breaker {
	if len(g.parts) == 1 {
		return &g.parts[0]
	}
	return &g.parts[h%uint64(len(g.parts))]
}

// admit reports whether a call at now on the key whose hash is h may go
// to the primary, and
// the breaker to report it to (with Success, Failure or Release, through
// g.success, g.failure and Breaker.Release) along with whether it probes:
// the Group's breaker while it is open (its probe asks for every key),
// else key's partition. When the call may not go, b is the breaker that
// refused it, for its RetryAfter.
func (g *Group) admit(h uint64, now time.Time) (b *Breaker, ok, probe bool) {
	if !g.breaker.Available() {
		ok, probe = g.breaker.Allow(now)
		return g.breaker, ok, probe
	}
	b = g.part(h)
	ok, probe = b.Allow(now)
	return b, ok, probe
}

// asking reports whether key's calls go to the primary: the Group's
// breaker and key's partition are closed.
func (g *Group) asking(key string) bool {
	return g.breaker.Available() && g.part(g.hash(key)).Available()
}

// success reports a call that worked to b (from admit): the Group's probe
// closes every partition; the last open partition or the Group's breaker
// closing logs that the store is back, with the counts of its outage.
func (g *Group) success(b *Breaker, probe bool) {
	if !b.Success(probe) {
		return
	}
	if b == g.breaker {
		for i := range g.parts {
			if g.parts[i].Reset() {
				g.open.Add(-1)
			}
		}
		g.logBack()
		return
	}
	if g.open.Add(-1) == 0 && g.breaker.Available() {
		g.logBack()
	}
}

// failure reports a failed call, made at now, to b (from admit): a
// partition that opens counts toward the quorum that opens the Group's
// breaker.
func (g *Group) failure(b *Breaker, now time.Time, probe bool) {
	if !b.Failure(now, probe) || b == g.breaker {
		return
	}
	if g.open.Add(1) >= g.quorum {
		g.breaker.Failure(now, false)
	}
}

// Split returns lim with its rate, and a bucket's burst, divided by n
// (rounded down, at least 1): the share of one of n servers that each
// enforce the limit alone. It is the one share of a limit among n in the
// project: the failure mode local (-failure-nodes) and relief's hybrid
// (-local-share) both take it. The period and algorithm are kept, and a
// window's burst, which it ignores. Rounding down keeps the fleet under
// the limit, except that a rate below n still gives each server 1, so the
// fleet may then admit up to n per period.
func Split(lim sluice.Limit, n int) sluice.Limit {
	if n <= 1 {
		return lim
	}
	lim.Rate = max(lim.Rate/n, 1)
	if lim.Algorithm.UsesBurst() {
		lim.Burst = max(lim.Burst/n, 1)
	}
	return lim
}

// Mode returns the Limiter's failure mode.
func (l *Limiter) Mode() Mode { return l.mode }

// Allow is shorthand for AllowN(ctx, key, lim, 1).
func (l *Limiter) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return l.AllowN(ctx, key, lim, 1)
}

// AllowN asks the primary, unless its breaker is open, and falls back to the
// Limiter's Mode when the primary fails or is skipped.
func (l *Limiter) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	res, _, err := l.Decide(ctx, key, lim, cost)
	return res, err
}

// Decide is AllowN that also reports whether the decision was made without
// the primary (it failed, or the open breaker skipped it): a caller that
// counts store failures per rule (package service) counts those.
func (l *Limiter) Decide(ctx context.Context, key string, lim sluice.Limit, cost int) (res sluice.Result, fellBack bool, err error) {
	g := l.g
	now := g.breaker.Now()
	h := g.hash(key)
	b, ok, probe := g.admit(h, now)
	if !ok {
		res, err = l.degrade(ctx, b, key, h, lim, cost, nil)
		return res, true, err
	}
	cctx, judged := g.bound(ctx, now)
	res, err = g.cfg.Primary.AllowN(cctx, key, lim, cost)
	ranOut := cctx.Err() != nil
	g.release(cctx)
	if err == nil {
		g.success(b, probe)
		if l.mode == Local && g.learned != nil {
			g.learned.learn(h, res, now)
		}
		return res, false, nil
	}
	if errors.Is(err, sluice.ErrBadInput) {
		b.Release(probe)
		return res, false, err
	}
	if callerGaveUp(ctx, ranOut, judged) {
		b.Release(probe)
		return sluice.Result{}, false, err
	}
	g.failure(b, now, probe)
	res, err = l.degrade(ctx, b, key, h, lim, cost, err)
	return res, true, err
}

// RefundN gives units back to where they were spent: the primary while the
// breaker is closed, the local limiter while it is open in Local mode (in
// Open and Closed modes nothing was spent then). A decision made on one side
// of a breaker change and refunded on the other goes to the wrong store;
// refunds never raise a key above a fresh key's allowance, so the cost is at
// most that refund.
func (l *Limiter) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	cfg := &l.g.cfg
	if l.g.asking(key) {
		rf, ok := cfg.Primary.(sluice.Refunder)
		if !ok {
			return nil
		}
		cctx, _ := l.g.bound(ctx, l.g.breaker.Now())
		defer l.g.release(cctx)
		return rf.RefundN(cctx, key, lim, cost)
	}
	if rf, ok := cfg.Local.(sluice.Refunder); ok && l.mode == Local {
		share := cfg.Share(lim)
		return rf.RefundN(ctx, key, share, min(cost, share.Capacity()))
	}
	return nil
}

// bound returns ctx bounded for one call to the primary (to be given back
// with release): by Timeout, and
// by 9/10 of the time ctx has left, so that the Mode can still answer
// before ctx's deadline when the primary runs out of time. judged reports
// whether the primary was given enough time (Timeout/10) for running out
// of it to be its failure (see Config.Timeout). now is the breaker's
// reading of the time for this call: when the breaker reads the system
// clock, it is used as the start of the bound rather than a second
// reading (a decision reads the clock once for both).
func (g *Group) bound(ctx context.Context, now time.Time) (_ *callCtx, judged bool) {
	if g.cfg.Clock != nil { // the breaker's time is not the deadlines'
		now = time.Now()
	}
	d := g.cfg.Timeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, dl.Sub(now)/10*9)
	}
	return g.callCtx(ctx, now, d), d >= g.cfg.Timeout/10
}

// callerGaveUp reports whether a failed call to the primary says nothing
// about the store: the caller cancelled ctx, or the call ran out of a time
// too short to judge the store by (bound's judged is false). A call that
// ran out of a time long enough, whether Timeout or the caller's deadline,
// is the store's failure: it was slower than the time there was.
func callerGaveUp(ctx context.Context, ranOut, judged bool) bool {
	return errors.Is(ctx.Err(), context.Canceled) || ranOut && !judged
}

// degrade answers without the primary, as the Mode says. cause is the
// primary's error, or nil when the breaker skipped it. A denial's
// RetryAfter is the time until b's next probe (the back-off while it is
// closed); b is the breaker that refused the call or counted its failure.
func (l *Limiter) degrade(ctx context.Context, b *Breaker, key string, h uint64, lim sluice.Limit, cost int, cause error) (sluice.Result, error) {
	g := l.g
	g.countFallback(cause)
	switch l.mode {
	case Closed:
		retry := b.RetryAfter(b.Now())
		if cause == nil {
			return sluice.Result{RetryAfter: retry}, errCircuitOpen
		}
		return sluice.Result{RetryAfter: retry}, fmt.Errorf("%w: %w", ErrUnavailable, cause)
	case Local:
		share := g.cfg.Share(lim)
		if cost > share.Capacity() {
			// The whole limit would admit it, this server's share never
			// can: a denial, not bad input.
			return sluice.Result{RetryAfter: b.RetryAfter(b.Now())}, nil
		}
		if g.cfg.Local == nil {
			return sluice.Result{}, errors.New("failsafe: Local mode needs Config.Local")
		}
		res, err := g.cfg.Local.AllowN(ctx, key, share, cost)
		if err != nil || !res.Allowed {
			return res, err
		}
		// What the primary last reported left for key, split as the limit
		// is: this server spends at most its share of that (the unit
		// just spent locally stays spent).
		if rem, hold, ok := g.learned.remaining(h, g.breaker.Now()); ok && share.Capacity()-res.Remaining > rem/max(g.cfg.NodesNow(), 1) {
			return sluice.Result{RetryAfter: hold, ResetAfter: hold}, nil
		}
		return res, nil
	default: // Open: admitted; the allowance is unknown, so report it untouched
		return sluice.Result{Allowed: true, Remaining: max(lim.Capacity()-cost, 0)}, nil
	}
}

// countFallback counts an answer made without the primary, and cause (the
// primary's error, nil when the breaker skipped it) as one of its errors,
// then logs as maybeLog does.
func (g *Group) countFallback(cause error) {
	if cause != nil {
		g.errors.Add(1)
		g.errorsTotal.Add(1)
	}
	g.fallback.Add(1)
	g.fallbackTotal.Add(1)
	g.maybeLog(cause)
}

// maybeLog writes one line per LogInterval while the primary fails: the
// mode, the primary's errors and the decisions made without it (both
// since the previous line and since New; a decision skipped by the open
// breaker is a fallback decision, not an error), whether the breaker is
// open, the last error and when the next probe is due.
func (g *Group) maybeLog(cause error) {
	if !g.logMu.TryLock() {
		return
	}
	defer g.logMu.Unlock()
	now := g.breaker.Now()
	if now.Sub(g.lastLog) < g.cfg.LogInterval {
		return
	}
	g.lastLog = now
	errs, fb := g.errors.Swap(0), g.fallback.Swap(0)
	breaker := "closed"
	until := g.breaker.OpenUntil()
	if !until.IsZero() {
		breaker = "open"
	}
	attrs := []any{"mode", g.cfg.LogMode, "breaker", breaker,
		"errors", errs, "fallback_decisions", fb,
		"errors_total", g.errorsTotal.Load(), "fallback_decisions_total", g.fallbackTotal.Load()}
	if cause != nil {
		attrs = append(attrs, "last_error", cause.Error())
	}
	if !until.IsZero() {
		attrs = append(attrs, "retry_at", until.UTC())
	}
	if len(g.parts) > 1 {
		attrs = append(attrs, "open_partitions", g.open.Load(), "partitions", len(g.parts))
	}
	g.cfg.Logger.Warn("failsafe: rate limit store failing", attrs...)
}

// logBack writes the line that says the primary answers again (the Group's
// breaker closed, or its last open partition), with the errors and the
// decisions made without the primary since the previous line and since
// NewGroup: the counts that a metric of the fallback decisions (package
// service's sluice_rls_fallback_decisions_total) adds up to. The next
// failure is logged at once. At most one such line per LogInterval (a
// partition that keeps opening and closing, under a flapping hot key,
// must not log per flap): a recovery within it is not logged, and its
// counts go to the next line.
func (g *Group) logBack() {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	now := g.breaker.Now()
	if !g.lastBack.IsZero() && now.Sub(g.lastBack) < g.cfg.LogInterval {
		return
	}
	g.lastBack, g.lastLog = now, time.Time{}
	errs, fb := g.errors.Swap(0), g.fallback.Swap(0)
	g.cfg.Logger.Info("failsafe: rate limit store is back", "mode", g.cfg.LogMode,
		"errors", errs, "fallback_decisions", fb,
		"errors_total", g.errorsTotal.Load(), "fallback_decisions_total", g.fallbackTotal.Load())
}

// FallbackDecisions returns how many decisions (and peeks) the Group's
// Limiters made without the primary since NewGroup, the figure its log
// lines give as fallback_decisions_total.
func (g *Group) FallbackDecisions() int64 { return g.fallbackTotal.Load() }

// Available reports whether the Group's breaker is closed: the primary is
// being asked (for the keys whose partition is closed, see
// Config.Partitions).
func (l *Limiter) Available() bool { return l.g.breaker.Available() }

// OpenPartitions returns how many partitions of the Group's breaker are
// open.
func (l *Limiter) OpenPartitions() int { return l.g.OpenPartitions() }
