// Package rlqstest is a client of Envoy's rate limit quota service that
// behaves as the rate_limit_quota filter documents, for tests: it reports
// every bucket's usage at a reporting interval (a new bucket at once),
// decides requests from the bucket's assignment, its
// no_assignment_behavior before the first one, its
// expired_assignment_behavior after an assignment's time to live, forgets
// a bucket the server abandons, and reopens a lost stream at the next
// report.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package rlqstest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Settings are a client's bucket settings (the filter's
// RateLimitQuotaBucketSettings, the same for every bucket).
type Settings struct {
	// Domain is sent in each stream's first message.
	Domain string
	// ReportingInterval is how often usage is reported. Zero: 5 s, what
	// Envoy's filter uses whatever its configuration says.
	ReportingInterval time.Duration
	// NoAssignment is no_assignment_behavior's fallback_rate_limit; nil:
	// allow all.
	NoAssignment *typev3.RateLimitStrategy
	// ExpiredFallback and ExpiredTimeout are expired_assignment_behavior:
	// the strategy applied for ExpiredTimeout once an assignment expires;
	// after it, or with ExpiredFallback nil, the bucket is back to
	// NoAssignment (what Envoy does).
	ExpiredFallback *typev3.RateLimitStrategy
	ExpiredTimeout  time.Duration
}

// Client is one simulated Envoy. Its methods are safe for concurrent use.
type Client struct {
	set  Settings
	dial func() (Conn, error)

	sendMu  sync.Mutex // held across building and sending a message, before mu
	mu      sync.Mutex
	conn    Conn // nil while the stream is down
	sent    bool // the stream's first message was sent
	buckets map[string]*cbucket
	stop    chan struct{}
	done    sync.WaitGroup
	// Abandoned counts the abandon actions received.
	abandoned int
}

// cbucket is one bucket of the client.
type cbucket struct {
	id              map[string]string
	allowed, denied uint64
	lastReport      time.Time
	strategy        *typev3.RateLimitStrategy // nil: no assignment
	expires         time.Time                 // zero: never
	tokens          float64
	filled          time.Time
	history         []*typev3.RateLimitStrategy
}

// New starts a client that opens its streams with dial. Close stops it.
func New(set Settings, dial func() (Conn, error)) *Client {
	if set.ReportingInterval == 0 {
		set.ReportingInterval = 5 * time.Second
	}
	c := &Client{set: set, dial: dial, buckets: make(map[string]*cbucket), stop: make(chan struct{})}
	c.done.Add(1)
	go c.reportLoop()
	return c
}

// Close ends the stream and stops the client's goroutines.
func (c *Client) Close() {
	close(c.stop)
	c.mu.Lock()
	if c.conn != nil {
		_ = c.conn.CloseSend()
	}
	c.mu.Unlock()
	c.done.Wait()
}

// Request decides one request of the bucket id: true to admit it. A new
// bucket is reported at once.
func (c *Client) Request(id map[string]string) bool {
	c.mu.Lock()
	now := time.Now()
	k := key(id)
	b := c.buckets[k]
	isNew := b == nil
	if isNew {
		b = &cbucket{id: maps.Clone(id), lastReport: now}
		c.buckets[k] = b
	}
	ok := decide(b, c.active(b, now), now)
	if ok {
		b.allowed++
	} else {
		b.denied++
	}
	c.mu.Unlock()
	if isNew {
		c.report(func() []*cbucket {
			if c.buckets[k] == b {
				return []*cbucket{b}
			}
			return nil
		}, now)
	}
	return ok
}

// active returns the strategy that decides b's requests at now.
func (c *Client) active(b *cbucket, now time.Time) *typev3.RateLimitStrategy {
	switch {
	case b.strategy == nil:
		return c.set.NoAssignment
	case b.expires.IsZero() || now.Before(b.expires):
		return b.strategy
	case c.set.ExpiredFallback != nil && now.Before(b.expires.Add(c.set.ExpiredTimeout)):
		return c.set.ExpiredFallback
	}
	b.strategy = nil // back to no assignment, as Envoy does
	return c.set.NoAssignment
}

// decide applies a strategy to one request; nil allows.
func decide(b *cbucket, s *typev3.RateLimitStrategy, now time.Time) bool {
	switch {
	case s == nil:
		return true
	case s.GetTokenBucket() != nil:
		refill(b, s.GetTokenBucket(), now)
		if b.tokens >= 1 {
			b.tokens--
			return true
		}
		return false
	case s.GetRequestsPerTimeUnit() != nil:
		return true // Envoy does not support it and fails open
	default:
		return s.GetBlanketRule() == typev3.RateLimitStrategy_ALLOW_ALL
	}
}

// refill adds the tokens of the time since the last fill.
func refill(b *cbucket, tb *typev3.TokenBucket, now time.Time) {
	secs := tb.GetFillInterval().AsDuration().Seconds()
	per := 1.0
	if tb.GetTokensPerFill() != nil {
		per = float64(tb.GetTokensPerFill().GetValue())
	}
	if secs > 0 {
		b.tokens = min(float64(tb.GetMaxTokens()), b.tokens+now.Sub(b.filled).Seconds()*per/secs)
	}
	b.filled = now
}

// Buckets returns how many buckets the client holds.
func (c *Client) Buckets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buckets)
}

// Abandoned returns how many abandon actions the client applied.
func (c *Client) Abandoned() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.abandoned
}

// Strategy returns the bucket's assigned strategy (nil: none) and when it
// expires.
func (c *Client) Strategy(id map[string]string) (*typev3.RateLimitStrategy, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.buckets[key(id)]; b != nil {
		return b.strategy, b.expires
	}
	return nil, time.Time{}
}

// History returns every strategy the bucket was assigned, in order (an
// abandoned bucket starts over).
func (c *Client) History(id map[string]string) []*typev3.RateLimitStrategy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.buckets[key(id)]; b != nil {
		return slices.Clone(b.history)
	}
	return nil
}

// Rate returns the requests per second of the bucket's token bucket
// assignment, 0 without one.
func (c *Client) Rate(id map[string]string) float64 {
	s, _ := c.Strategy(id)
	return RateOf(s)
}

// RateOf returns the requests per second of a token bucket strategy, 0
// for any other.
func RateOf(s *typev3.RateLimitStrategy) float64 {
	tb := s.GetTokenBucket()
	if tb == nil {
		return 0
	}
	return float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
}

// reportLoop reports every bucket at each interval.
func (c *Client) reportLoop() {
	defer c.done.Done()
	t := time.NewTicker(c.set.ReportingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-t.C:
			c.report(func() []*cbucket { return slices.Collect(maps.Values(c.buckets)) }, now)
		}
	}
}

// report reports the buckets which returns (called with mu held),
// opening the stream if it is down; the reports are dropped if that
// fails. Elapsed time is whole seconds, as Envoy sends it.
func (c *Client) report(which func() []*cbucket, now time.Time) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.mu.Lock()
	m := c.buildLocked(which(), now)
	conn := c.conn
	c.mu.Unlock()
	if m == nil {
		return
	}
	if err := conn.Send(m); err != nil {
		c.mu.Lock()
		if c.conn == conn {
			c.conn = nil
		}
		c.mu.Unlock()
	}
}

// buildLocked returns the message reporting bs, nil with nothing to send
// or no stream.
func (c *Client) buildLocked(bs []*cbucket, now time.Time) *rlqspb.RateLimitQuotaUsageReports {
	if len(bs) == 0 {
		return nil
	}
	if c.conn == nil && !c.openLocked() {
		return nil
	}
	m := &rlqspb.RateLimitQuotaUsageReports{}
	if !c.sent {
		m.Domain = c.set.Domain
	}
	for _, b := range bs {
		el := now.Sub(b.lastReport).Truncate(time.Second)
		m.BucketQuotaUsages = append(m.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqspb.BucketId{Bucket: b.id}, TimeElapsed: durationpb.New(el),
			NumRequestsAllowed: b.allowed, NumRequestsDenied: b.denied})
		b.allowed, b.denied, b.lastReport = 0, 0, now
	}
	c.sent = true
	return m
}

// openLocked opens a stream and starts receiving on it.
func (c *Client) openLocked() bool {
	select {
	case <-c.stop:
		return false
	default:
	}
	conn, err := c.dial()
	if err != nil {
		return false
	}
	c.conn, c.sent = conn, false
	c.done.Add(1)
	go c.recvLoop(conn)
	return true
}

// recvLoop applies the server's actions until the stream ends.
func (c *Client) recvLoop(conn Conn) {
	defer c.done.Done()
	for {
		m, err := conn.Recv()
		if err != nil {
			c.mu.Lock()
			if c.conn == conn {
				c.conn = nil
			}
			c.mu.Unlock()
			return
		}
		c.apply(m, time.Now())
	}
}

// apply applies one response's actions in order; an action for a bucket
// the client does not hold is ignored, as Envoy does.
func (c *Client) apply(m *rlqspb.RateLimitQuotaResponse, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range m.GetBucketAction() {
		k := key(a.GetBucketId().GetBucket())
		b := c.buckets[k]
		if b == nil {
			continue
		}
		if a.GetAbandonAction() != nil {
			delete(c.buckets, k)
			c.abandoned++
			continue
		}
		qa := a.GetQuotaAssignmentAction()
		if qa == nil {
			continue
		}
		assign(b, qa, now)
	}
}

// assign applies an assignment: the same strategy as an active one only
// extends its time to live; another one starts a token bucket at the old
// one's fraction of tokens (full for the first).
func assign(b *cbucket, qa *rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction, now time.Time) {
	s := qa.GetRateLimitStrategy()
	if s == nil {
		s = &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_ALLOW_ALL}}
	}
	b.expires = time.Time{}
	if ttl := qa.GetAssignmentTimeToLive(); ttl != nil {
		b.expires = now.Add(ttl.AsDuration())
	}
	b.history = append(b.history, s)
	if b.strategy != nil && proto.Equal(b.strategy, s) {
		return
	}
	frac := 1.0
	if old := b.strategy.GetTokenBucket(); old != nil && old.GetMaxTokens() > 0 {
		refill(b, old, now)
		frac = min(b.tokens/float64(old.GetMaxTokens()), 1)
	}
	b.strategy = s
	b.tokens = frac * float64(s.GetTokenBucket().GetMaxTokens())
	b.filled = now
}

// key names a bucket id, order-insensitively.
func key(id map[string]string) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(id)) {
		fmt.Fprintf(&sb, "%d:%s=%s|", len(k), k, id[k])
	}
	return sb.String()
}
