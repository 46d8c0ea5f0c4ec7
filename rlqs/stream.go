package rlqs

import (
	"context"
	"errors"
	"io"
	"maps"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/clip"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/config"
)

// stream is the state of one Envoy's stream; only its run goroutine
// touches it.
type stream struct {
	srv    *Server
	st     grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	client string
	named  bool
	id     uint64        // a named client's stream number (see Server.claim)
	writer string        // a named client's stream's token in the store (see Store.Forget); "" unnamed
	nudge  chan struct{} // a bucket's number of clients changed

	domain  string
	rules   *config.Domain     // nil: the domain is not in the config
	set     *config.RLQS       // the domain's rlqs section; nil: defaults
	buckets map[string]*bucket // by idKey
}

// bucket is one subscribed bucket of a stream.
type bucket struct {
	id         *rlqspb.BucketId
	rule       *config.RateLimit // nil: no rule matches
	key        string            // the store's name; "" without a rule
	demand     float64           // requests per second, last report
	lastActive time.Time         // last report with requests, or the subscription
	rate       float64           // the token rate last sent
	strategy   *typev3.RateLimitStrategy
	gen        uint64    // the bucket's generation at the last division
	reported   bool      // a report with time_elapsed set the demand
	reportedAt time.Time // the stream's last report of the bucket; zero: none yet
	raiseAt    time.Time // when rate may rise to the share computed; zero: no rise pending
	written    float64   // the demand written to the store at the last division
	maxDemand  float64   // demandBound times the rule's rate; +Inf without a limit
	cost       int64     // the bytes the memory budget counts for it
}

// run receives the stream's messages and answers them until the client
// ends the stream, a message is refused, or the server shuts down.
func (c *stream) run() error {
	msgs := make(chan *rlqspb.RateLimitQuotaUsageReports)
	errc := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			m, err := c.st.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-done:
				return
			}
		}
	}()
	idleFor := c.srv.cfg.IdleTimeout
	idle := time.NewTimer(idleFor)
	defer idle.Stop()
	var tick <-chan time.Time
	shutdown := false
	defer func() { c.forgetAll(shutdown) }()
	for {
		select {
		case m := <-msgs:
			idle.Reset(idleFor)
			if err := c.handle(m); err != nil {
				return err
			}
			if tick == nil {
				t := time.NewTicker(tickEvery)
				defer t.Stop()
				tick = t.C
			}
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-idle.C:
			if tick == nil {
				return status.Errorf(codes.DeadlineExceeded, "rlqs: no usage report within %v of opening the stream", idleFor)
			}
			return status.Errorf(codes.DeadlineExceeded, "rlqs: no usage report for %v; the stream is idle", idleFor)
		case now := <-tick:
			if err := c.abandonIdle(now); err != nil {
				return err
			}
			if err := c.redivide(now, true); err != nil {
				return err
			}
		case <-c.nudge:
			if err := c.redivide(time.Now(), false); err != nil {
				return err
			}
		case <-c.srv.closing:
			shutdown = true
			c.fallback()
			return status.Error(codes.Unavailable, "rlqs: the server is shutting down; reconnect")
		}
	}
}

// handle answers one message of usage reports with an assignment for
// each bucket it reports.
func (c *stream) handle(m *rlqspb.RateLimitQuotaUsageReports) error {
	if err := c.checkDomain(m.GetDomain()); err != nil {
		return err
	}
	if err := validate(m); err != nil {
		return err
	}
	now := time.Now()
	resp := &rlqspb.RateLimitQuotaResponse{}
	for _, u := range m.GetBucketQuotaUsages() {
		b, err := c.bucketOf(u.GetBucketId(), now)
		if err != nil {
			return err
		}
		if b == nil {
			continue // refused at the memory budget: no assignment
		}
		n := float64(u.GetNumRequestsAllowed()) + float64(u.GetNumRequestsDenied())
		if el := u.GetTimeElapsed().AsDuration(); u.GetTimeElapsed() != nil && el > 0 {
			if !b.reportedAt.IsZero() {
				// The requests came after the stream's previous report:
				// claiming less time cannot make them count faster.
				el = max(el, now.Sub(b.reportedAt))
			}
			b.demand = min(n/el.Seconds(), b.maxDemand)
			b.reported = true
		}
		b.reportedAt = now
		if n > 0 {
			b.lastActive = now
		}
		if a := c.assign(b, now); a != nil {
			resp.BucketAction = append(resp.BucketAction, a)
		}
	}
	if len(resp.BucketAction) == 0 {
		return nil
	}
	return c.st.Send(resp)
}

// checkDomain takes the domain of the first message, and refuses a
// missing one or a change.
func (c *stream) checkDomain(d string) error {
	if c.domain == "" {
		if d == "" {
			return status.Error(codes.InvalidArgument, "rlqs: the first message has no domain")
		}
		if len(d) > MaxPairBytes {
			return status.Errorf(codes.InvalidArgument, "rlqs: domain %q is over %d bytes", truncate(d), MaxPairBytes)
		}
		c.domain = d
		c.refresh()
		return nil
	}
	if d != "" && d != c.domain {
		return status.Errorf(codes.InvalidArgument, "rlqs: domain %q after %q: a stream serves one domain; open a new stream", truncate(d), truncate(c.domain))
	}
	return nil
}

// refresh takes the domain's rules and rlqs section from the running
// config: a reload applies to the buckets subscribed after it, and to
// the stream's settings from then on.
func (c *stream) refresh() {
	c.rules, c.set = c.srv.cfg.Rules().Domain(c.domain), nil
	if c.rules != nil {
		c.set = c.rules.RLQS
	}
}

// validate checks a message's reports: bucket ids of 1 to
// config.MaxBucketPairs pairs with non-empty keys and values of at most
// MaxPairBytes, and no negative time elapsed. A missing or zero
// time_elapsed is accepted (Envoy sends 0s in a bucket's first report).
func validate(m *rlqspb.RateLimitQuotaUsageReports) error {
	for i, u := range m.GetBucketQuotaUsages() {
		pairs := u.GetBucketId().GetBucket()
		if len(pairs) == 0 || len(pairs) > config.MaxBucketPairs {
			return status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: a bucket id has 1 to %d pairs, not %d", i, config.MaxBucketPairs, len(pairs))
		}
		for k, v := range pairs {
			if k == "" || v == "" || len(k) > MaxPairBytes || len(v) > MaxPairBytes {
				return status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: bucket id pair %q=%q: keys and values are 1 to %d bytes", i, truncate(k), truncate(v), MaxPairBytes)
			}
		}
		if d := u.GetTimeElapsed(); d != nil && (d.CheckValid() != nil || d.AsDuration() < 0) {
			return status.Errorf(codes.InvalidArgument, "rlqs: bucket_quota_usages[%d]: time_elapsed %v is not a duration of 0 or more", i, d.AsDuration())
		}
	}
	return nil
}

// bucketOf returns the stream's bucket of id, subscribing it (and mapping
// it to a rule) on its first report; nil when a new bucket does not fit in
// the server's memory budget (the stream's other buckets keep theirs).
func (c *stream) bucketOf(id *rlqspb.BucketId, now time.Time) (*bucket, error) {
	k := idKey(id.GetBucket())
	if b := c.buckets[k]; b != nil {
		return b, nil
	}
	if len(c.buckets) >= MaxBuckets {
		return nil, status.Errorf(codes.ResourceExhausted, "rlqs: more than %d buckets on one stream", MaxBuckets)
	}
	c.refresh()
	b := &bucket{lastActive: now, maxDemand: math.Inf(1)}
	if c.rules != nil {
		if r, path := c.rules.LookupBucket(id.GetBucket()); r != nil {
			b.rule, b.key = r, bucketKey(c.domain, r, path)
			if rate, _ := ruleRate(r); rate > 0 {
				b.maxDemand = demandBound * rate
			}
		}
	}
	b.cost = bucketCost(id.GetBucket(), k, b.key)
	if !c.srv.mem.take(b.cost) {
		c.srv.mem.refusedBuckets.Add(1)
		c.srv.warnFull(now, c.domain)
		return nil, nil
	}
	b.id = &rlqspb.BucketId{Bucket: maps.Clone(id.GetBucket())}
	c.buckets[k] = b
	return b, nil
}

// assign returns the bucket's assignment for now, or nil when the store
// fails before the bucket had one (the Envoy keeps its
// no_assignment_behavior).
func (c *stream) assign(b *bucket, now time.Time) *rlqspb.RateLimitQuotaResponse_BucketAction {
	switch r := b.rule; {
	case r == nil || r.Unlimited || r.ShadowMode:
		b.strategy = blanket(typev3.RateLimitStrategy_ALLOW_ALL)
	case r.BlocksAll():
		b.strategy = blanket(typev3.RateLimitStrategy_DENY_ALL)
	default:
		if !c.divide(b, now) && b.strategy == nil {
			return nil
		}
	}
	return assignment(b, c.set.TTL())
}

// divide computes the stream's share of the bucket's rule from every
// client's demand in the store; false when the store failed (the bucket
// keeps its strategy).
func (c *stream) divide(b *bucket, now time.Time) bool {
	ctx, cancel := context.WithTimeout(c.st.Context(), storeTimeout)
	defer cancel()
	g0 := c.srv.stats.watch(c.domain, b.key, c.client, c.nudge)
	st := c.srv.cfg.Store
	read := func() (map[string]float64, error) { return st.Demands(ctx, b.key, now) }
	var demand map[string]float64
	fresh := false
	known := false // the client has a record that the others' shares count
	var err error
	if c.named && b.strategy == nil {
		// A named client's first division looks for its record: a
		// reconnected client is no newcomer (see settle), and a first
		// report with time_elapsed 0 (as Envoy sends on a new stream)
		// leaves its demand as its record has it, so it keeps its share.
		if demand, fresh, err = c.srv.stats.demands(b.key, now, maxDemandAge, true, read); err == nil {
			d, ok := demand[c.client]
			known = ok
			if ok && !b.reported {
				b.demand = min(max(d, 0), b.maxDemand)
			} else {
				demand = nil // read again after the report, which adds or changes the client
			}
		}
	}
	if err == nil {
		err = st.Report(ctx, b.key, c.client, c.writer, b.demand, now, c.set.ReportLife())
	}
	if err == nil && demand == nil {
		// A client's first division reads the store, and so does one whose
		// demand moved, so that the clients of a bucket that join or change
		// together see each other; a steady report reuses a recent read.
		force := b.strategy == nil || !closeRates(b.written, b.demand)
		demand, fresh, err = c.srv.stats.demands(b.key, now, maxDemandAge, force, read)
	}
	if err != nil {
		c.srv.warnStore(now, "rlqs: the store failed; the bucket keeps its assignment", b.key, err)
		return false
	}
	rate, burst := ruleRate(b.rule)
	reserve := c.set.ReserveFraction()
	mine, n := share(rate, reserve, demand, c.client, b.demand, !c.srv.cfg.DivideByStream)
	remote := n > c.srv.stats.local(b.key)
	grant := c.settle(b, mine, rate*reserve/float64(n), known, remote, now)
	if b.strategy == nil || !closeRates(grant, b.rate) {
		b.rate = grant
		b.strategy = tokenBucket(grant, burst*grant/rate)
	}
	b.written = b.demand
	sum := -1.0
	if fresh {
		sum = 0
		for _, d := range demand {
			sum += d
		}
	} else {
		n = -1 // a reused read: the number of clients is as last known
	}
	c.srv.stats.set(c.domain, b.key, c.client, c.nudge, b.demand, b.rate, n, sum)
	b.gen = g0 // any change since the read, this one's included, divides again
	return true
}

// settleAfter is how long a share waits to rise: by then every replica
// with clients of the bucket has read the store again (a tick's read at
// most recountAge+tickEvery after the change, unless a report's read saw
// it sooner) and shrunk their shares to make room.
const settleAfter = recountAge + tickEvery

// settle returns the rate b may hold now, given its share mine. When the
// bucket has clients on other replicas (remote), a client new to the
// store (known false, its first division) starts at its part of the
// reserve, reserved (at most), and a share that rose by more than 5%
// keeps the rate held; either rises to its share settleAfter later (at
// the next tick that divides again then), when the other clients, on
// every replica, have seen the change and shrunk. So the sum of the
// assignments held never passes the limit by more than the newcomers'
// parts of the reserve. A smaller share, and any share when all the
// bucket's clients are on this replica (a join nudges them at once), is
// given at once.
func (c *stream) settle(b *bucket, mine, reserved float64, known, remote bool, now time.Time) float64 {
	grant := mine
	switch {
	case !remote:
	case b.strategy == nil && !known:
		grant = min(mine, reserved)
	case b.strategy != nil && mine > b.rate && !closeRates(mine, b.rate):
		grant = b.rate
	}
	if grant >= mine {
		b.raiseAt = time.Time{}
		return grant
	}
	if b.raiseAt.IsZero() {
		b.raiseAt = now.Add(settleAfter)
	}
	if !now.Before(b.raiseAt) {
		b.raiseAt = time.Time{}
		return mine
	}
	return grant
}

// tickEvery is how often a stream looks for idle buckets and for buckets
// whose number of clients changed.
const tickEvery = time.Second

// redivide sends a new assignment for each bucket whose number of clients
// changed since its last division (a client joined or left, seen by a
// report to this replica), when the share moved: so that a client does
// not hold a share meant for fewer clients until its next report. A
// report to this replica nudges its streams at once; another replica's
// change is seen at the next tick after a report here.
//
// On a tick (reread), each bucket's demands are read again when the
// replica's last read is over recountAge old, so that a client coming or
// going on another replica, or a change of the demands' sum by more than
// 5%, is seen within about 2 s even when no report comes here. A bucket
// whose share waits to rise (see settle) divides again at the first tick
// after its time.
func (c *stream) redivide(now time.Time, reread bool) error {
	resp := &rlqspb.RateLimitQuotaResponse{}
	for _, b := range c.buckets {
		if b.strategy == nil || b.rule == nil || b.rule.Unlimited || b.rule.ShadowMode || b.rule.BlocksAll() {
			continue
		}
		if reread {
			c.recount(b, now)
		}
		due := !b.raiseAt.IsZero() && !now.Before(b.raiseAt)
		if c.srv.stats.generation(b.key) == b.gen && !due {
			continue
		}
		old := b.strategy
		if c.divide(b, now) && b.strategy != old {
			resp.BucketAction = append(resp.BucketAction, assignment(b, c.set.TTL()))
		}
	}
	if len(resp.BucketAction) == 0 {
		return nil
	}
	return c.st.Send(resp)
}

// assignment returns b's strategy as an action with a time to live.
func assignment(b *bucket, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: b.id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: durationpb.New(ttl),
			RateLimitStrategy:    b.strategy,
		}},
	}
}

// recount reads b's demands if the replica's last read is stale, and
// records the number of clients it finds.
func (c *stream) recount(b *bucket, now time.Time) {
	ctx, cancel := context.WithTimeout(c.st.Context(), storeTimeout)
	defer cancel()
	m, fresh, err := c.srv.stats.demands(b.key, now, recountAge, false, func() (map[string]float64, error) { return c.srv.cfg.Store.Demands(ctx, b.key, now) })
	if err != nil || !fresh {
		return
	}
	n := len(m)
	if _, ok := m[c.client]; !ok {
		n++
	}
	var sum float64
	for _, d := range m {
		sum += d
	}
	c.srv.stats.count(b.key, n, sum)
}

// abandonIdle tells the client to abandon the buckets that saw no
// request for the domain's abandon_after, and forgets them.
func (c *stream) abandonIdle(now time.Time) error {
	resp := &rlqspb.RateLimitQuotaResponse{}
	for k, b := range c.buckets {
		if now.Sub(b.lastActive) < c.set.Abandon() {
			continue
		}
		resp.BucketAction = append(resp.BucketAction, &rlqspb.RateLimitQuotaResponse_BucketAction{
			BucketId:     b.id,
			BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
		})
		c.forget(b)
		c.srv.mem.release(b.cost)
		delete(c.buckets, k)
	}
	if len(resp.BucketAction) == 0 {
		return nil
	}
	return c.st.Send(resp)
}

// fallback sends every assigned bucket its strategy with a time to live
// of 0: it expires at once, so that the Envoy applies its
// expired_assignment_behavior while it reconnects.
func (c *stream) fallback() {
	resp := &rlqspb.RateLimitQuotaResponse{}
	for _, b := range c.buckets {
		if b.strategy != nil {
			resp.BucketAction = append(resp.BucketAction, assignment(b, 0))
		}
	}
	if len(resp.BucketAction) > 0 {
		_ = c.st.Send(resp) // the stream ends anyway
	}
}

// forgetAll removes the stream's records when it ends: all of them,
// except those of a named client at shutdown, which the replica it
// reconnects to takes over, or when a newer stream of the client is open
// here, which holds them now.
func (c *stream) forgetAll(shutdown bool) {
	keep := c.named && !c.srv.release(c.client, c.id)
	for _, b := range c.buckets {
		c.srv.mem.release(b.cost)
		if keep {
			continue
		}
		if shutdown && c.named {
			c.srv.stats.remove(b.key, c.client)
			continue
		}
		c.forget(b)
	}
}

// forget removes the stream's record of b from the store and the metrics.
func (c *stream) forget(b *bucket) {
	if b.key == "" {
		return
	}
	c.srv.stats.remove(b.key, c.client)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.st.Context()), storeTimeout)
	defer cancel()
	if err := c.srv.cfg.Store.Forget(ctx, b.key, c.client, c.writer); err != nil {
		c.srv.warnStore(time.Now(), "rlqs: the store failed to forget a client; its record expires", b.key, err)
	}
}

// truncate shortens a client's string for an error message.
func truncate(s string) string { return clip.Ellipsis(s, 64) }
