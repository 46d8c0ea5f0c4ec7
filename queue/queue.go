// Package queue is the leaky bucket as a queue: instead of turning away a
// request that arrives too early, it makes the request wait its turn, the
// way NGINX's limit_req does with burst, nodelay and delay=N.
//
// Picture each key as a bucket that leaks Rate requests per Period. Every
// admitted request pours one request into it. A request that finds the
// bucket empty goes through at once; one that finds earlier requests still
// in it waits until they have leaked out, so requests leave at the steady
// rate however they arrive. The bucket holds the running request and at most
// Burst waiting ones; a request that would overflow it is rejected, and a
// rejected request pours nothing in. Delay lets the first Delay waiting
// requests go through at once while still counting towards Burst, and
// NoDelay lets every admitted request through at once, so that Burst only
// caps how many may run ahead of the rate.
//
// In NGINX terms, with rate=Rr/s (or Rr/m),
//
//	limit_req zone=z burst=B;          Config{Rate: R, Period: time.Second, Burst: B}
//	limit_req zone=z burst=B delay=N;  Config{Rate: R, Period: time.Second, Burst: B, Delay: N}
//	limit_req zone=z burst=B nodelay;  Config{Rate: R, Period: time.Second, Burst: B, NoDelay: true}
//
// The accounting is the meter's: a Queue asks any sluice.Limiter under a
// sluice.LeakyBucket limit with Burst B+1 (the meter counts every request
// that may pass back to back, NGINX's burst only the ones beyond the first).
// With package memstore that is NGINX's accounting to the milli-request.
//
// Wait blocks the calling goroutine on a timer and starts no goroutine of its
// own. A request whose context ends while it waits gives its place back if
// the Limiter is also a sluice.Refunder, so that another request may take
// it. Reserve decides without waiting and leaves the waiting to the caller,
// as a reverse proxy or a scheduler may want.
package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// ErrRejected is the error Wait returns when the key's queue is full. It is
// returned as is, not wrapped, so that a rejection allocates nothing: an
// overloaded server takes this path more than any other. The Decision
// returned with it says when to retry.
var ErrRejected = errors.New("queue: rejected: the key's queue is full")

// Config is a queue's policy, in NGINX limit_req's terms. The zero Config is
// invalid: Rate and Period have no default.
type Config struct {
	// Rate is how many requests leave the queue per Period, NGINX's
	// rate=Nr/s or Nr/m. Must be at least 1.
	Rate int
	// Period is the time in which Rate requests leave: time.Second for
	// NGINX's r/s, time.Minute for r/m. Must be positive. Like NGINX, the
	// meter keeps the rate in whole milli-requests per second, so 1 per
	// 3 s runs at 0.333 requests per second.
	Period time.Duration
	// Burst is NGINX's burst=N: how many requests beyond the one running
	// may be admitted ahead of the rate, to wait (or, with Delay or NoDelay,
	// to run early). Zero, the default, admits no request ahead of the rate,
	// as NGINX does without burst=. NGINX rejects an explicit burst=0 in its
	// configuration; here zero simply means "not set". Must not be negative.
	Burst int
	// Delay is NGINX's delay=N: of the admitted requests beyond the one
	// running, the first Delay proceed at once and only the rest wait. Zero,
	// the default, makes every excess request wait, as NGINX does without
	// delay= (NGINX rejects an explicit delay=0; here zero means "not set").
	// Must be between 0 and Burst; Delay equal to Burst is NoDelay.
	Delay int
	// NoDelay is NGINX's nodelay: no admitted request waits, and Burst only
	// caps how many may run ahead of the rate. It excludes Delay, as in
	// NGINX's grammar [nodelay | delay=N].
	NoDelay bool
}

// Validate reports whether c is a usable policy. The error wraps
// sluice.ErrInvalidLimit and names the field at fault.
func (c Config) Validate() error {
	_, err := c.limit()
	return err
}

// limit returns the meter's limit for c, or why c is invalid.
func (c Config) limit() (sluice.Limit, error) {
	switch {
	case c.Rate < 1:
		return sluice.Limit{}, fmt.Errorf("queue: %w: rate %d must be at least 1", sluice.ErrInvalidLimit, c.Rate)
	case c.Period <= 0:
		return sluice.Limit{}, fmt.Errorf("queue: %w: period %v must be positive", sluice.ErrInvalidLimit, c.Period)
	case c.Burst < 0:
		return sluice.Limit{}, fmt.Errorf("queue: %w: burst %d must not be negative", sluice.ErrInvalidLimit, c.Burst)
	case c.Burst >= math.MaxInt32:
		return sluice.Limit{}, fmt.Errorf("queue: %w: burst %d is too large", sluice.ErrInvalidLimit, c.Burst)
	case c.Delay < 0:
		return sluice.Limit{}, fmt.Errorf("queue: %w: delay %d must not be negative", sluice.ErrInvalidLimit, c.Delay)
	case c.Delay > c.Burst:
		return sluice.Limit{}, fmt.Errorf("queue: %w: delay %d exceeds burst %d", sluice.ErrInvalidLimit, c.Delay, c.Burst)
	case c.NoDelay && c.Delay != 0:
		return sluice.Limit{}, fmt.Errorf("queue: %w: nodelay and delay %d are exclusive", sluice.ErrInvalidLimit, c.Delay)
	}
	lim := sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: c.Rate, Period: c.Period, Burst: c.Burst + 1}
	if err := lim.Validate(); err != nil {
		return sluice.Limit{}, fmt.Errorf("queue: %w", err)
	}
	return lim, nil
}

// Queue delays requests per key as NGINX's limit_req does. Create one with
// New; the zero Queue is not usable. A Queue is safe for concurrent use and
// holds no state of its own: the key's bucket lives in the Limiter, so many
// Queues (or processes) sharing a Limiter and a Config share their queues.
type Queue struct {
	l   sluice.Limiter
	r   sluice.Refunder // nil when l cannot give units back
	lim sluice.Limit
	// free is how long the bucket takes to drain the running request and
	// the Delay that may run early, in whole milliseconds: an admitted
	// request waits until only that much is left in the bucket.
	free    time.Duration
	noDelay bool
}

// New returns a Queue that meters requests with l under cfg. If l is also a
// sluice.Refunder, a request cancelled while it waits gives its place back;
// otherwise the place stays spent until the bucket drains. The error, for an
// invalid cfg or a nil l, wraps sluice.ErrInvalidLimit.
func New(l sluice.Limiter, cfg Config) (*Queue, error) {
	if l == nil {
		return nil, fmt.Errorf("queue: %w: nil limiter", sluice.ErrInvalidLimit)
	}
	lim, err := cfg.limit()
	if err != nil {
		return nil, err
	}
	q := &Queue{l: l, lim: lim, noDelay: cfg.NoDelay || cfg.Delay == cfg.Burst}
	q.r, _ = l.(sluice.Refunder)
	// Rounding up to whole milliseconds, as the meter rounds the time the
	// bucket takes to drain, keeps every wake-up on the meter's millisecond
	// grid (see Decision.Delay).
	ms := ceilDiv(int64(cfg.Delay+1)*1e6, algorithm.MilliRate(lim))
	if ms > math.MaxInt64/int64(time.Millisecond) {
		q.noDelay = true
	} else {
		q.free = time.Duration(ms) * time.Millisecond
	}
	return q, nil
}

// Limit returns the limit under which q asks its Limiter: a
// sluice.LeakyBucket with Config's Rate and Period and Burst Config.Burst+1.
// Pass it to the Limiter's own methods, or to headers, to see the same
// buckets.
func (q *Queue) Limit() sluice.Limit { return q.lim }

// Status says what became of a request, in the words of NGINX's
// $limit_req_status.
type Status uint8

const (
	// Passed means admitted and free to proceed at once.
	Passed Status = iota
	// Delayed means admitted, but first to wait Decision.Delay.
	Delayed
	// Rejected means turned away because the queue was full; nothing was
	// spent.
	Rejected
)

var statusNames = [...]string{Passed: "PASSED", Delayed: "DELAYED", Rejected: "REJECTED"}

// String returns "PASSED", "DELAYED" or "REJECTED".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Decision is the queue's answer to one request: the meter's Result and how
// long the request must wait. It is a plain value; the zero Decision is a
// rejection that holds nothing to cancel.
type Decision struct {
	// Result is the meter's decision. When Allowed is false the queue was
	// full, nothing was spent, and RetryAfter is the time until a request
	// of the same cost would be admitted (the Retry-After header).
	sluice.Result

	// Delay is how long an admitted request must wait before it proceeds,
	// counted from the meter's decision; zero for a rejected request, for
	// one of the first Delay excess requests, and always with NoDelay.
	//
	// NGINX waits (excess − delay)·1000/rate milliseconds, rounded down,
	// from its own millisecond clock. Delay ends on the same millisecond or
	// one millisecond later, never earlier; it is exactly NGINX's when that
	// quotient and (delay+1)·10⁶/rate are whole numbers of milliseconds (as
	// at 1r/s, 2r/s, 10r/s or 30r/m) and the clock reads whole
	// milliseconds. This holds while the Limiter's clock does not go
	// backwards. Delay is computed from Result.ResetAfter, so any Limiter
	// whose leaky bucket reports the time until it drains empty will do.
	//
	// Example: at 1r/s with burst=5, of seven requests at once the first six
	// wait 0s, 1s, 2s, 3s, 4s and 5s, and the seventh is rejected.
	Delay time.Duration

	q    *Queue
	key  string
	cost int
}

// Status reports whether d passed, was delayed or was rejected.
func (d Decision) Status() Status {
	switch {
	case !d.Allowed:
		return Rejected
	case d.Delay > 0:
		return Delayed
	default:
		return Passed
	}
}

// Cancel gives back the units of an admitted request that will not run, so
// that another request may take its place, and returns the Limiter's error.
// It does nothing for a rejected or zero Decision, or when the Limiter is
// not a sluice.Refunder. Call it at most once per Decision: a second call
// would give back units that other requests spent. Cancel uses ctx as is;
// pass context.WithoutCancel(ctx) to give back from a context that has
// ended.
func (d Decision) Cancel(ctx context.Context) error {
	if !d.Allowed || d.q == nil || d.q.r == nil {
		return nil
	}
	if err := d.q.r.RefundN(ctx, d.key, d.q.lim, d.cost); err != nil {
		return fmt.Errorf("queue: giving back %d for key %q: %w", d.cost, d.key, err)
	}
	return nil
}

// Reserve is shorthand for ReserveN(ctx, key, 1).
func (q *Queue) Reserve(ctx context.Context, key string) (Decision, error) {
	return q.ReserveN(ctx, key, 1)
}

// ReserveN decides a request of cost units for key without waiting. If the
// Decision is admitted, the request should proceed after Decision.Delay, or
// call Decision.Cancel if it will not run; if it is rejected, nothing was
// spent. A rejection is a Decision, never an error: the error is the
// Limiter's, for bad input (wrapping sluice.ErrInvalidKey,
// sluice.ErrInvalidCost or sluice.ErrCostExceedsCapacity) or a failing
// backend. ReserveN allocates nothing beyond what the Limiter does.
func (q *Queue) ReserveN(ctx context.Context, key string, cost int) (Decision, error) {
	res, err := q.l.AllowN(ctx, key, q.lim, cost)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Result: res}
	if !res.Allowed {
		return d, nil
	}
	d.q, d.key, d.cost = q, key, cost
	if !q.noDelay && res.ResetAfter > q.free {
		d.Delay = res.ResetAfter - q.free
	}
	return d, nil
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (q *Queue) Wait(ctx context.Context, key string) (Decision, error) {
	return q.WaitN(ctx, key, 1)
}

// WaitN admits a request of cost units for key and blocks until it may
// proceed. A nil error means proceed; the Decision says how long the wait
// was. Otherwise:
//
//   - The queue is full: the error is ErrRejected, nothing was spent, and
//     the Decision's RetryAfter says when to try again.
//   - ctx has already ended: the error is ctx.Err(), and the Limiter is not
//     asked.
//   - ctx's deadline comes no later than the wait would end: WaitN returns
//     at once, without waiting for the deadline, with an error wrapping
//     context.DeadlineExceeded, having given the place back.
//   - ctx ends during the wait: WaitN returns at once with ctx.Err(), as is,
//     having given the place back.
//   - Bad input or a failing backend: the Limiter's error (see ReserveN).
//
// Places are given back with Decision.Cancel under
// context.WithoutCancel(ctx), so only if the Limiter is a sluice.Refunder;
// if that fails, its error is joined to the context's. When the context
// ends before the Limiter is asked, the Decision is the zero Decision; when
// it ends later, the Decision is the admission that was given back.
//
// The wait runs on the runtime's timers, so the Limiter's clock should be
// the real one (or, in tests, a testing/synctest bubble's).
func (q *Queue) WaitN(ctx context.Context, key string, cost int) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	d, err := q.ReserveN(ctx, key, cost)
	switch {
	case err != nil:
		return d, err
	case !d.Allowed:
		return d, ErrRejected
	case d.Delay <= 0:
		return d, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d.Delay {
		err := fmt.Errorf("queue: waiting %v would reach the context deadline: %w", d.Delay, context.DeadlineExceeded)
		return d, giveBack(ctx, d, err)
	}
	t := time.NewTimer(d.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return d, nil
	case <-ctx.Done():
		return d, giveBack(ctx, d, ctx.Err())
	}
}

// giveBack cancels d after its wait was abandoned with err, and returns err,
// joined with Cancel's error if any.
func giveBack(ctx context.Context, d Decision, err error) error {
	if cerr := d.Cancel(context.WithoutCancel(ctx)); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
