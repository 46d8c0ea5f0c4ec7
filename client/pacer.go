package client

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// ErrWaitTooLong is wrapped by the error of a Pacer that would have to wait
// past the request's deadline to send it. The request is not sent, and a
// Transport does not retry it.
var ErrWaitTooLong = errors.New("client: wait would exceed the request's deadline")

// sweepEvery is how often a Pacer drops idle keys (and, with its own
// limiter, their allowances).
const sweepEvery = time.Minute

// Pacer is an http.RoundTripper that keeps requests under a rate limit on
// the client side: before sending a request it takes one unit of its key's
// allowance under Limit from Limiter, and when none is left it waits for
// the time the limiter reports, bounded by the request's context, rather
// than send a request the server would refuse. Set Limit a little below the
// server's limit (say 90%): the client's and the server's clocks and
// windows never line up exactly.
//
// # Adapting to the server
//
// A server that sends the RateLimit field (draft-ietf-httpapi-ratelimit-
// headers-11) says how many more requests it will admit (r) before its
// quota resets (t). The Pacer keeps, per key, the most recent such report
// (that of the most restrictive item: least r, then longest t) and lets at
// most r more requests go before the reset, counting the requests already
// sent after the one that was answered. When the report says none are left,
// the key waits until the reset, even if its own bucket has tokens. So a
// Pacer whose Limit is above what the server allows (misconfigured, or a
// quota shared with other clients) still stops before being refused, at
// the cost of some throughput, because a report's t is an upper bound. A
// report only narrows what the local bucket allows, never widens it;
// reports older than the one in force are ignored; a report lasts at most
// MaxServerWait.
//
// A 429 or 503 with a Retry-After (or an exhausted RateLimit item) blocks
// its key in the same way until the time the server gave.
//
// # Learning the server's policy
//
// A server that sends the RateLimit-Policy field announces its quotas: q
// requests per window of w seconds, for each named policy. When a policy
// allows less than Limit (q per w below Rate per Period), the Pacer paces
// the response's key at Fraction of it instead: ⌊Fraction·q⌋ per w, with
// a burst small enough (⌊Fraction·q⌋ and q−⌊Fraction·q⌋, whichever is
// less, at least 1) that no span of w sees more than q requests. With
// several such policies the lowest rate and the smallest burst apply.
// The bucket keeps its key, so what was spent under Limit still counts.
//
// Adapting never goes above Limit: a policy at or above Limit's rate is
// not used, and a later field whose policies are all at or above it (or
// all of another unit) returns the key to Limit. Each field replaces what
// the key learned before; a response without the field changes nothing,
// since a server may send it only now and then. A malformed field is
// ignored as a whole, as the draft requires. Policies counted in other
// units (qu="content-bytes", "concurrent-requests") and policies without
// w are not used, nor are policies the core cannot express (a window of
// more than a century); partition keys (pk) are not consulted, the Key
// function already separates allowances. A quota of 0 is paced as a quota
// of 1, so that the key keeps learning when the server admits it again.
// The RateLimit field's reports, whatever policy their items name, still
// narrow the learned rate as described above. A key that sends nothing
// for its longest learned window (at least a minute, at most an hour)
// forgets what it learned.
//
// The zero Pacer is not usable: Limit must be valid. A Pacer is safe for
// concurrent use; do not change its fields once it is in use.
type Pacer struct {
	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper
	// Limit is each key's allowance, typically a token bucket:
	// sluice.PerSecond(9) against a server that allows 10/s. Each request
	// costs 1.
	Limit sluice.Limit
	// Limiter holds the allowances. Nil means an in-process limiter of the
	// Pacer's own (the algorithms of package algorithm in a map, on the
	// system's monotonic clock), whose idle keys are dropped every minute:
	// package client needs no store. A shared limiter (such as package
	// redisstore) paces many processes together.
	Limiter sluice.Limiter
	// Key names the allowance a request spends. Nil means PerHost.
	Key func(*http.Request) string
	// MaxServerWait bounds how long a server's report can hold a key.
	// Zero means DefaultMaxServerWait; negative means no bound.
	MaxServerWait time.Duration
	// Fraction is the share of a quota announced in RateLimit-Policy that
	// a key adapted to it uses (see above). Zero, or any value outside
	// (0, 1], means DefaultFraction. It does not scale Limit, which is
	// used as given.
	Fraction float64
	// IgnoreServer turns adaptation off: only Limit paces, and the
	// RateLimit, RateLimit-Policy and Retry-After fields are not read.
	IgnoreServer bool

	once      sync.Once
	local     *localLimiter // set when the Pacer owns its limiter
	mu        sync.Mutex
	keys      map[string]*paceState
	lastSweep time.Time
}

// PerHost is a Pacer's default key: the request URL's host (with the port,
// if any), or the request's Host when the URL has none.
func PerHost(req *http.Request) string {
	if req.URL != nil && req.URL.Host != "" {
		return req.URL.Host
	}
	return req.Host
}

// paceState is what a Pacer knows of one key beyond its bucket: the server's
// latest report and policy. Guarded by its mutex.
type paceState struct {
	mu       sync.Mutex
	inflight int       // RoundTrips holding this state; guarded by Pacer.mu
	sent     uint64    // requests sent; each gets the next sequence number
	applied  uint64    // sequence number of the request whose report is in force
	until    time.Time // when the report in force ends; zero: none
	budget   int64     // requests the report still allows before until

	learnedAt uint64        // sequence number of the request whose policy is in force
	policy    sluice.Limit  // the limit learned from RateLimit-Policy; zero Rate: none
	remember  time.Duration // how long an idle key keeps policy
	lastUsed  time.Time     // when a RoundTrip last took this state
}

func (p *Pacer) init() {
	p.once.Do(func() {
		if p.Limiter == nil {
			p.local = newLocalLimiter()
			p.Limiter = p.local
		}
		p.keys = make(map[string]*paceState)
	})
}

// acquire returns key's state, counting the caller in.
func (p *Pacer) acquire(key string, now time.Time) *paceState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.lastSweep) >= sweepEvery {
		p.lastSweep = now
		if p.local != nil {
			p.local.sweep()
		}
		for k, s := range p.keys {
			s.mu.Lock()
			idle := s.inflight == 0 && !now.Before(s.until) &&
				(s.policy.Rate == 0 || now.Sub(s.lastUsed) >= s.remember)
			s.mu.Unlock()
			if idle {
				delete(p.keys, k)
			}
		}
	}
	s := p.keys[key]
	if s == nil {
		s = &paceState{}
		p.keys[key] = s
	}
	s.inflight++
	s.mu.Lock()
	s.lastUsed = now
	s.mu.Unlock()
	return s
}

func (p *Pacer) release(s *paceState) {
	p.mu.Lock()
	s.inflight--
	p.mu.Unlock()
}

// RoundTrip implements http.RoundTripper. It returns an error wrapping
// ErrWaitTooLong, without sending the request, when the wait would end
// after the request's deadline, and the context's cause when the context
// ends during the wait.
func (p *Pacer) RoundTrip(req *http.Request) (*http.Response, error) {
	s, seq, err := p.enter(req)
	defer p.release(s)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	base := p.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err == nil && !p.IgnoreServer {
		p.observe(s, seq, resp)
	}
	return resp, err
}

// enter waits until req may be sent (see wait), under the key p.Key (or
// PerHost) gives it. It returns the key's state, which the caller hands to
// release once the request is done, whatever the error, and the request's
// sequence number.
func (p *Pacer) enter(req *http.Request) (*paceState, uint64, error) {
	p.init()
	key := PerHost(req)
	if p.Key != nil {
		key = p.Key(req)
	}
	s := p.acquire(key, time.Now())
	seq, err := p.wait(req, key, s)
	return s, seq, err
}

// wait blocks until the request may be sent, and returns its sequence number.
func (p *Pacer) wait(req *http.Request, key string, s *paceState) (uint64, error) {
	ctx := req.Context()
	deadline, hasDeadline := ctx.Deadline()
	pause := func(d time.Duration, why string) error {
		if hasDeadline && !time.Now().Add(d).Before(deadline) {
			return fmt.Errorf("client: pacing %q: %s asks for %v: %w", key, why, d, ErrWaitTooLong)
		}
		return sleep(ctx, d)
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if d := s.blocked(time.Now()); d > 0 {
			if err := pause(d, "the server's report"); err != nil {
				return 0, err
			}
			continue
		}
		res, err := p.Limiter.AllowN(ctx, key, s.limit(p.Limit), 1)
		if err != nil {
			return 0, fmt.Errorf("client: pacing %q: %w", key, err)
		}
		if !res.Allowed {
			if err := pause(max(res.RetryAfter, time.Millisecond), "the limit"); err != nil {
				return 0, err
			}
			continue
		}
		if seq, ok := s.take(time.Now()); ok {
			return seq, nil
		}
		// The server's report ran out while the bucket was consulted: the
		// token is lost, which only slows the key down.
	}
}

// blocked returns how long the report in force forbids sending, or 0.
func (s *paceState) blocked(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until.IsZero() || !now.Before(s.until) {
		s.until = time.Time{}
		return 0
	}
	if s.budget > 0 {
		return 0
	}
	return s.until.Sub(now)
}

// limit returns the limit the key is paced by: the learned policy if any,
// else lim.
func (s *paceState) limit(lim sluice.Limit) sluice.Limit {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.policy.Rate != 0 {
		return s.policy
	}
	return lim
}

// learn puts the policy l, drawn from the response to request seq, in force,
// unless a later request's is.
func (s *paceState) learn(seq uint64, l learned) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.learnedAt {
		return
	}
	s.learnedAt = seq
	s.policy = l.limit
	s.remember = min(max(l.window, sweepEvery), maxPolicyMemory)
}

// take spends one request of the report in force, if any, and numbers the
// request.
func (s *paceState) take(now time.Time) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.until.IsZero() && now.Before(s.until) {
		if s.budget <= 0 {
			return 0, false
		}
		s.budget--
	}
	s.sent++
	return s.sent, true
}

// observe applies the policy and the report of the response to request seq.
func (p *Pacer) observe(s *paceState, seq uint64, resp *http.Response) {
	now := time.Now()
	if l, ok := learnPolicies(resp.Header, p.Limit, fraction(p.Fraction)); ok {
		s.learn(seq, l)
	}
	// A refusal's Retry-After blocks the key; otherwise, and for any other
	// response, the RateLimit field's report does (ServerWait's rules).
	var rep report
	ok := false
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		rep.reset, ok = retryAfter(resp.Header, now)
	}
	if !ok {
		rep, ok = rateLimitReport(resp.Header)
	}
	if ok {
		p.hold(s, seq, now, rep)
	}
}

// hold puts the server's report on request seq in force on s, unless a
// later request's is: until rep.reset from now (bounded by MaxServerWait),
// at most rep.remaining requests, less those sent since seq (none left
// blocks the key until then).
func (p *Pacer) hold(s *paceState, seq uint64, now time.Time, rep report) {
	if maxWait := serverWaitBound(p.MaxServerWait); maxWait > 0 {
		rep.reset = min(rep.reset, maxWait)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.applied {
		return
	}
	s.applied = seq
	s.budget = rep.remaining - int64(s.sent-seq)
	s.until = now.Add(rep.reset)
}
