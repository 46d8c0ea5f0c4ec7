package plans_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/plans"
)

// countingSource answers t, counting reads; err, when set, fails them;
// gate, when set, holds each read until closed.
type countingSource struct {
	mu    sync.Mutex
	t     plans.Tenant
	err   error
	reads atomic.Int64
	gate  chan struct{}
}

func (s *countingSource) Tenant(ctx context.Context, _ string) (plans.Tenant, error) {
	s.reads.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t, s.err
}

func (s *countingSource) set(t plans.Tenant, err error) {
	s.mu.Lock()
	s.t, s.err = t, err
	s.mu.Unlock()
}

var (
	perMin = func(n int) sluice.Limit {
		return sluice.Limit{Algorithm: sluice.FixedWindow, Rate: n, Period: time.Minute, Burst: n}
	}
	ctx = context.Background()
)

// A record is read at most once per staleness: a change shows at the
// first lookup at least Staleness after the last read, not before.
func TestCacheReadsAtMostOncePerStaleness(t *testing.T) {
	clk := clocktest.New()
	src := &countingSource{t: plans.Tenant{Plan: "a", Limits: map[string]sluice.Limit{"d.k": perMin(1)}}}
	c := plans.NewCache(src, plans.Config{Clock: clk, Staleness: 250 * time.Millisecond})
	for range 100 {
		if lim, ok := c.Limit(ctx, "t", "d.k"); !ok || lim.Rate != 1 {
			t.Fatalf("Limit = %v %v, want the plan's 1", lim, ok)
		}
	}
	src.set(plans.Tenant{Plan: "b", Limits: map[string]sluice.Limit{"d.k": perMin(2)}}, nil)
	clk.Advance(249 * time.Millisecond)
	if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != 1 {
		t.Errorf("within the staleness: rate %d, want the cached 1", lim.Rate)
	}
	clk.Advance(time.Millisecond)
	if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != 2 {
		t.Errorf("at the staleness: rate %d, want the new 2", lim.Rate)
	}
	if n := src.reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}
	c.Invalidate("t")
	c.Limit(ctx, "t", "d.k")
	if n := src.reads.Load(); n != 3 {
		t.Errorf("after Invalidate: %d reads, want 3", n)
	}
	c.Limit(ctx, "u", "d.k")
	c.Invalidate("") // a plan changed: every tenant
	c.Limit(ctx, "t", "d.k")
	c.Limit(ctx, "u", "d.k")
	if n := src.reads.Load(); n != 6 {
		t.Errorf("after Invalidate(\"\"): %d reads, want 6 (both tenants read again)", n)
	}
}

// An override wins over the plan until the instant it expires, judged by
// the cache's clock on every lookup, not by the staleness.
func TestOverrideWinsUntilItExpires(t *testing.T) {
	clk := clocktest.New()
	exp := clk.Now().Add(time.Second)
	src := &countingSource{t: plans.Tenant{Limits: map[string]sluice.Limit{"d.k": perMin(1)},
		Overrides: map[string]plans.Override{"d.k": {Limit: perMin(9), Expires: exp}, "d.j": {Limit: perMin(7)}}}}
	c := plans.NewCache(src, plans.Config{Clock: clk, Staleness: time.Hour})
	if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != 9 {
		t.Errorf("before expiry: %d, want the override's 9", lim.Rate)
	}
	clk.Set(exp)
	if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != 1 {
		t.Errorf("at expiry: %d, want the plan's 1", lim.Rate)
	}
	if lim, ok := c.Limit(ctx, "t", "d.j"); !ok || lim.Rate != 7 {
		t.Errorf("an override without expiry: %v %v, want 7", lim, ok)
	}
	if _, ok := c.Limit(ctx, "t", "d.none"); ok {
		t.Error("a name with no plan limit and no override has a limit")
	}
	if _, ok := c.Limit(ctx, "", "d.k"); ok {
		t.Error("the empty tenant has a limit")
	}
}

// While the source fails, the last record read stays in force and is read
// again once per staleness, not on every lookup.
func TestFailingSourceKeepsTheLastRecord(t *testing.T) {
	clk := clocktest.New()
	src := &countingSource{t: plans.Tenant{Limits: map[string]sluice.Limit{"d.k": perMin(3)}}}
	c := plans.NewCache(src, plans.Config{Clock: clk, Staleness: time.Second, Logger: discard()})
	c.Limit(ctx, "t", "d.k")
	src.set(plans.Tenant{}, errors.New("database down"))
	clk.Advance(time.Second)
	for range 10 {
		if lim, ok := c.Limit(ctx, "t", "d.k"); !ok || lim.Rate != 3 {
			t.Fatalf("while failing: %v %v, want the last known 3", lim, ok)
		}
	}
	if n := src.reads.Load(); n != 2 {
		t.Errorf("%d reads while failing, want 2 (one per staleness)", n)
	}
}

// Concurrent lookups of a tenant whose record is being read share that
// one read. In a bubble, so that every lookup has surely started (one
// reading, the others waiting for it) before the read is let through.
func TestConcurrentLookupsShareOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &countingSource{t: plans.Tenant{Limits: map[string]sluice.Limit{"d.k": perMin(4)}}, gate: make(chan struct{})}
		c := plans.NewCache(src, plans.Config{Clock: clocktest.New()})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != 4 {
					t.Errorf("rate %d, want 4", lim.Rate)
				}
			})
		}
		synctest.Wait()
		close(src.gate)
		wg.Wait()
		if n := src.reads.Load(); n != 1 {
			t.Errorf("%d reads, want 1", n)
		}
	})
}

// Each of the cache's tables is bounded, whatever tenants clients name:
// MaxTenants the tenants the Source knows, MaxUnknownTenants the names it
// does not.
func TestCacheIsBoundedInTenants(t *testing.T) {
	for _, c := range []struct {
		name string
		t    plans.Tenant
		cfg  plans.Config
	}{
		{"known", plans.Tenant{Plan: "p"}, plans.Config{MaxTenants: 3}},
		{"unknown", plans.Tenant{}, plans.Config{MaxUnknownTenants: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := &countingSource{t: c.t}
			c.cfg.Clock = clocktest.New()
			cache := plans.NewCache(src, c.cfg)
			for i := range 100 {
				cache.Limit(ctx, string(rune('a'+i%26))+string(rune('a'+i/26)), "d.k")
			}
			// The three newest are held: looking them up again reads nothing.
			before := src.reads.Load()
			cache.Limit(ctx, "vd", "d.k")
			if src.reads.Load() != before {
				t.Error("the newest tenant was dropped")
			}
			cache.Limit(ctx, "aa", "d.k")
			if src.reads.Load() != before+1 {
				t.Error("the first tenant of 100 is still held with a bound of 3")
			}
		})
	}
}

// Limits decode strictly and convert to the sluice.Limit they describe;
// FromSluice is the inverse.
func TestParseLimit(t *testing.T) {
	lim, err := plans.ParseLimit([]byte(`{"rate": 10000, "calendar": {"unit": "month", "time_zone": "Europe/Berlin", "anchor_day": 15}}`))
	if err != nil {
		t.Fatal(err)
	}
	if lim.Algorithm != sluice.FixedWindow || lim.Rate != 10000 || lim.Calendar.Unit != sluice.CalendarMonth ||
		lim.Calendar.Location.String() != "Europe/Berlin" || lim.Calendar.AnchorDay != 15 || lim.Period != 30*24*time.Hour {
		t.Errorf("ParseLimit = %+v", lim)
	}
	back, err := plans.FromSluice(lim).Sluice()
	if err != nil || back != lim {
		t.Errorf("FromSluice round trip: %+v %v, want %+v", back, err, lim)
	}
	tb, err := plans.ParseLimit([]byte(`{"algorithm": "token_bucket", "rate": 5, "period": "1s", "burst": 20}`))
	if err != nil || tb.Burst != 20 || tb.Algorithm != sluice.TokenBucket {
		t.Errorf("token bucket: %+v %v", tb, err)
	}
	for _, bad := range []string{`{"rate": 1}`, `{"rate": 0, "period": "1s"}`, `{"rate": 1, "period": "1s", "x": 1}`,
		`{"rate": 1, "period": "1s"} {}`, `{"rate": 1, "calendar": {"unit": "month", "time_zone": "Mars/Olympus"}}`,
		`{"algorithm": "magic", "rate": 1, "period": "1s"}`, `[]`,
		`{"rate": 1, "period": "1s"}}`, `{"rate": 1, "period": "1s"}]`} {
		if _, err := plans.ParseLimit([]byte(bad)); !errors.Is(err, plans.ErrInvalid) {
			t.Errorf("ParseLimit(%s) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := plans.ParseLimits([]byte(`{"": {"rate": 1, "period": "1s"}}`)); !errors.Is(err, plans.ErrInvalid) {
		t.Errorf("an empty limit name: %v", err)
	}
}

// While a tenant's record is read again, other lookups get the record
// before it at once instead of waiting for the read (a hung database costs
// one lookup per staleness its wait, not every lookup).
func TestLookupsDuringARereadUseThePreviousRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		src := &countingSource{t: plans.Tenant{Limits: map[string]sluice.Limit{"d.k": perMin(1)}}}
		c := plans.NewCache(src, plans.Config{Clock: clk, Staleness: time.Second})
		c.Limit(ctx, "t", "d.k")
		src.set(plans.Tenant{Limits: map[string]sluice.Limit{"d.k": perMin(2)}}, nil)
		src.gate = make(chan struct{})
		clk.Advance(time.Second)
		done := make(chan sluice.Limit)
		go func() { lim, _ := c.Limit(ctx, "t", "d.k"); done <- lim }()
		synctest.Wait() // the reread has started and waits for the gate
		if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != 1 {
			t.Errorf("during the reread: rate %d, want the previous record's 1 without waiting", lim.Rate)
		}
		close(src.gate)
		if lim := <-done; lim.Rate != 2 {
			t.Errorf("the rereading lookup: rate %d, want the new 2", lim.Rate)
		}
	})
}

// A tenant name a client could send that no tenant may have is not looked
// up, whichever face asks (plans.Lookup for the middleware and the proxy,
// the cache itself as the service's TenantLimitsBy does): the Source is
// not read for it.
func TestLookupReadsNoSourceForAnImpossibleTenant(t *testing.T) {
	src := &countingSource{t: plans.Tenant{Limits: map[string]sluice.Limit{"p": perMin(5)}}}
	c := plans.NewCache(src, plans.Config{Clock: clocktest.New()})
	for _, look := range []struct {
		name string
		f    func(tenant string) (sluice.Limit, bool)
	}{
		{"Lookup", func(tenant string) (sluice.Limit, bool) { return plans.Lookup(ctx, c, tenant, "p") }},
		{"Cache.Limit", func(tenant string) (sluice.Limit, bool) { return c.Limit(ctx, tenant, "p") }},
	} {
		for _, tenant := range []string{"", strings.Repeat("a", plans.MaxNameLen+1), "a\nb", "\xff", "a\x7fb"} {
			if lim, ok := look.f(tenant); ok {
				t.Errorf("%s(%q) = %v, want none", look.name, tenant, lim)
			}
		}
		if n := src.reads.Load(); n != 0 {
			t.Fatalf("%s: the source was read %d times, want 0", look.name, n)
		}
	}
	if lim, ok := plans.Lookup(ctx, c, strings.Repeat("a", plans.MaxNameLen), "p"); !ok || lim.Rate != 5 {
		t.Fatalf("Lookup of a name of MaxNameLen bytes = %v %v, want the plan's 5", lim, ok)
	}
	if _, ok := plans.Lookup(ctx, nil, "acme", "p"); ok {
		t.Fatal("a nil Limits gave a limit")
	}
}

// A name the Source did not know is read again at the staleness like a
// known tenant's: a plan assigned to it shows within Staleness, and a plan
// taken away too; each record then lives in the table of what it is and is
// not read again before the staleness.
func TestTenantTurningKnownOrUnknownShowsWithinStaleness(t *testing.T) {
	clk := clocktest.New()
	src := &countingSource{}
	c := plans.NewCache(src, plans.Config{Clock: clk, Staleness: time.Second, MaxTenants: 1, MaxUnknownTenants: 1})
	plan := plans.Tenant{Plan: "a", Limits: map[string]sluice.Limit{"d.k": perMin(3)}}
	held := 0 // the rate held; 0: no limit (unknown)
	if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != held {
		t.Fatalf("an unknown tenant has rate %d", lim.Rate)
	}
	for i, s := range []struct {
		set  plans.Tenant
		want int
	}{{plan, 3}, {plans.Tenant{}, 0}, {plan, 3}} {
		before := src.reads.Load()
		src.set(s.set, nil)
		clk.Advance(time.Second - time.Millisecond)
		if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != held {
			t.Errorf("step %d within the staleness: rate %d, want the held %d", i, lim.Rate, held)
		}
		clk.Advance(time.Millisecond)
		for range 3 {
			if lim, _ := c.Limit(ctx, "t", "d.k"); lim.Rate != s.want {
				t.Errorf("step %d at the staleness: rate %d, want %d", i, lim.Rate, s.want)
			}
		}
		if n := src.reads.Load() - before; n != 1 {
			t.Errorf("step %d: %d reads, want 1 (at the staleness)", i, n)
		}
		held = s.want
	}
}

// After Invalidate, lookups do not use the record from before it, even
// while the read it causes is under way: they wait for that read, so a
// change made through this process takes effect at once.
func TestLookupsAfterInvalidateWaitForTheNewRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &countingSource{t: plans.Tenant{Limits: map[string]sluice.Limit{"d.k": perMin(1)}}}
		c := plans.NewCache(src, plans.Config{Clock: clocktest.New(), Staleness: time.Hour})
		c.Limit(ctx, "t", "d.k")
		src.set(plans.Tenant{Limits: map[string]sluice.Limit{"d.k": perMin(2)}}, nil)
		src.gate = make(chan struct{})
		c.Invalidate("t")
		got := make(chan int, 2)
		for range 2 {
			go func() { lim, _ := c.Limit(ctx, "t", "d.k"); got <- lim.Rate }()
			synctest.Wait()
		}
		if len(got) != 0 {
			t.Fatalf("a lookup after Invalidate answered %d before the read ended", <-got)
		}
		close(src.gate)
		for range 2 {
			if r := <-got; r != 2 {
				t.Errorf("a lookup after Invalidate: rate %d, want the new 2", r)
			}
		}
	})
}

// A plan's sliding window, which has no buckets or moments to set, gets the
// config's default layout where its rate allows it, as a file rule does, so
// that one key is not decided under two layouts by turns; a rate above
// sluice.MaxMomentsRate keeps the two-window counter.
func TestPlanSlidingWindowGetsTheDefaultLayout(t *testing.T) {
	lim, err := plans.ParseLimit([]byte(`{"algorithm": "sliding_window", "rate": 10, "period": "1m"}`))
	if err != nil || lim.Buckets != sluice.DefaultBuckets || lim.Moments != sluice.DefaultMoments {
		t.Errorf("ParseLimit = %+v, %v; want buckets %d, moments %d", lim, err, sluice.DefaultBuckets, sluice.DefaultMoments)
	}
	big, err := plans.ParseLimit([]byte(`{"algorithm": "sliding_window", "rate": 1000000, "period": "1m"}`))
	if err != nil || big.Buckets != 0 || big.Moments != 0 {
		t.Errorf("ParseLimit(rate 1000000) = %+v, %v; want the two-window counter", big, err)
	}
	if back, err := plans.FromSluice(lim).Sluice(); err != nil || back != lim {
		t.Errorf("FromSluice round trip: %+v %v, want %+v", back, err, lim)
	}
}
