package service_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// flaky is a store that fails while down and otherwise asks a memstore;
// it counts the calls that reach it. Like recorder it forwards the wrapped
// Limiter's optional capabilities (sluice.Peeker, sluice.Refunder,
// sluice.LimitValidator); while down, its peeks and refunds fail too.
type flaky struct {
	sluice.Limiter
	down  atomic.Bool
	calls atomic.Int64
}

func (f *flaky) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return sluice.Result{}, errDown
	}
	return f.Limiter.AllowN(ctx, key, lim, cost)
}

func (f *flaky) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	pk, ok := f.Limiter.(sluice.Peeker)
	if !ok {
		return sluice.Result{}, errors.ErrUnsupported
	}
	f.calls.Add(1)
	if f.down.Load() {
		return sluice.Result{}, errDown
	}
	return pk.Peek(ctx, key, lim)
}

func (f *flaky) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if _, ok := f.Limiter.(sluice.Refunder); !ok {
		return errors.ErrUnsupported
	}
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return refund(f.Limiter, ctx, key, lim, cost)
}

func (f *flaky) ValidateLimit(lim sluice.Limit) error { return validateLimit(f.Limiter, lim) }

// modeRules has one rule per failure mode in the domain "d": key "open",
// "closed", "local" (each with that failure_mode) and "default" (none),
// each rpu per unit.
func modeRules(rpu uint32, unit config.Unit) *fakeRules {
	f := &fakeRules{domain: "d"}
	for _, m := range []string{"open", "closed", "local", "default"} {
		rl := fixed("d."+m, rpu, unit)
		if m != "default" {
			rl.FailureMode = m
		}
		f.add(rl, m, "")
	}
	return f
}

// flakyStore returns a clock at t0 and a flaky store over a memory store
// on it, up.
func flakyStore(t *testing.T) (*clocktest.Clock, *flaky) {
	t.Helper()
	clock := clocktest.At(time.Unix(t0, 0))
	mem := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	return clock, &flaky{Limiter: mem}
}

// failHarness is a Service behind Config.Failure on a flaky store.
func failHarness(t *testing.T, p service.FailurePolicy) (*harness, *flaky) {
	t.Helper()
	clock, fl := flakyStore(t)
	if p.Clock == nil {
		p.Clock = clock
	}
	if p.Local == nil {
		p.Local = newLocal(t, clock)
	}
	h := start(t, t0, service.Config{Rules: modeRules(10, config.Second), Limiter: fl, Failure: &p, AllowRefunds: true})
	h.clock = clock
	return h, fl
}

// newLocal is a memory store for the rules whose failure_mode is local,
// closed when the test ends; a nil clock is the system's.
func newLocal(t *testing.T, clock sluice.Clock) *memstore.Store {
	local := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { local.Close() })
	return local
}

func answers(t *testing.T, h *harness, key string, n int) string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		resp, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc(key, "x")))
		if err != nil {
			t.Fatalf("%s hit %d: %v", key, i+1, err)
		}
		c := "ok"
		if resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT {
			c = "over"
		}
		out = append(out, c)
	}
	return strings.Join(out, " ")
}

func TestFailureModePerRule(t *testing.T) {
	for _, def := range []failsafe.Mode{failsafe.Open, failsafe.Closed, failsafe.Local} {
		t.Run("default "+def.String(), func(t *testing.T) {
			// A high threshold: the breaker stays closed, every call fails.
			h, fl := failHarness(t, service.FailurePolicy{Mode: def, Nodes: 2, Threshold: 1000})
			fl.down.Store(true)
			local := "ok ok ok ok ok over over" // 10/s split between 2 nodes: 5
			want := map[string]string{
				"open":   "ok ok ok ok ok ok ok",
				"closed": "over over over over over over over",
				"local":  local,
			}
			want["default"] = want[def.String()]
			for _, key := range []string{"open", "closed", "local", "default"} {
				if got := answers(t, h, key, 7); got != want[key] {
					t.Errorf("%s rule: %s, want %s", key, got, want[key])
				}
			}
			if got := fl.calls.Load(); got != 28 {
				t.Errorf("store calls = %d, want 28 (the breaker never opened)", got)
			}
			if got := counter(t, h, "sluice_rls_store_errors_total", "d.closed"); got != 7 {
				t.Errorf("store errors of d.closed = %v, want 7", got)
			}
		})
	}
}

func TestFailureModeHealthyStore(t *testing.T) {
	h, fl := failHarness(t, service.FailurePolicy{Mode: failsafe.Closed})
	for _, key := range []string{"open", "closed", "local", "default"} {
		if got, want := answers(t, h, key, 11), strings.Repeat("ok ", 10)+"over"; got != want {
			t.Errorf("%s rule on a healthy store: %s, want %s", key, got, want)
		}
	}
	if got := fl.calls.Load(); got != 44 {
		t.Errorf("store calls = %d, want 44", got)
	}
}

func TestFailureModeOpenReport(t *testing.T) {
	h, fl := failHarness(t, service.FailurePolicy{Threshold: 1000})
	fl.down.Store(true)
	resp, err := h.svc.ShouldRateLimit(context.Background(), request("d", 3, desc("open", "x")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statusString(resp.GetStatuses()[0]), `OK remaining=7 limit={10 SECOND ""} reset=0s`; got != want {
		t.Errorf("open rule while down: %s, want %s (the allowance untouched)", got, want)
	}
}

// TestFailureBreakerShared: one breaker guards the store for every rule,
// whatever its mode: failures of rules of different modes add up, once it
// opens no rule calls the store, and one successful probe brings every
// rule back to it. (With one partition: with DefaultPartitions each key's
// failures count toward its own partition, see
// TestFailureHotKeyLeavesOtherTenantsOnTheStore.)
func TestFailureBreakerShared(t *testing.T) {
	h, fl := failHarness(t, service.FailurePolicy{Mode: failsafe.Open, Threshold: 3, Backoff: time.Second, Partitions: 1})
	fl.down.Store(true)
	for _, key := range []string{"open", "closed", "local"} {
		answers(t, h, key, 1)
	}
	if got := fl.calls.Load(); got != 3 {
		t.Fatalf("store calls = %d, want 3", got)
	}
	// The breaker is open: each rule is answered by its mode, without the store.
	want := map[string]string{"open": "ok ok", "closed": "over over", "local": "ok ok", "default": "ok ok"}
	for _, key := range []string{"open", "closed", "local", "default"} {
		if got := answers(t, h, key, 2); got != want[key] {
			t.Errorf("%s rule with the breaker open: %s, want %s", key, got, want[key])
		}
	}
	if got := fl.calls.Load(); got != 3 {
		t.Errorf("store calls with the breaker open = %d, want still 3", got)
	}
	// The store comes back; after the back-off one call probes it, and
	// every rule is decided by it again.
	fl.down.Store(false)
	h.clock.Advance(time.Second)
	if got := answers(t, h, "closed", 1); got != "ok" {
		t.Errorf("closed rule, probe: %s, want ok", got)
	}
	for _, key := range []string{"open", "local", "default"} {
		answers(t, h, key, 1)
	}
	if got := fl.calls.Load(); got != 7 {
		t.Errorf("store calls after recovery = %d, want 7 (every rule asks the store)", got)
	}
}

func TestFailureLocalRefund(t *testing.T) {
	h, fl := failHarness(t, service.FailurePolicy{Threshold: 1})
	fl.down.Store(true)
	if got := answers(t, h, "local", 11); got != strings.Repeat("ok ", 10)+"over" {
		t.Fatalf("local rule while down: %s", got)
	}
	give := request("d", 4, desc("local", "x"))
	give.Descriptors[0].IsNegativeHits = true
	if _, err := h.svc.ShouldRateLimit(context.Background(), give); err != nil {
		t.Fatal(err)
	}
	if got, want := answers(t, h, "local", 5), "ok ok ok ok over"; got != want {
		t.Errorf("after a refund of 4 to the local store: %s, want %s", got, want)
	}
	// A refund for an open rule while the store is down is dropped, not an error.
	give = request("d", 4, desc("open", "x"))
	give.Descriptors[0].IsNegativeHits = true
	if _, err := h.svc.ShouldRateLimit(context.Background(), give); err != nil {
		t.Errorf("refund of an open rule while down: %v", err)
	}
}

func TestFailureOverrideKeepsMode(t *testing.T) {
	h, fl := failHarness(t, service.FailurePolicy{Mode: failsafe.Open, Threshold: 1000})
	fl.down.Store(true)
	d := desc("closed", "x")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 100, Unit: typepb.RateLimitUnit_MINUTE}
	resp, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, d))
	if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("override of a closed rule while down: %v, %v; want OVER_LIMIT", resp.GetOverallCode(), err)
	}
	// An override without a rule takes the default.
	d = desc("nomatch", "x")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 100, Unit: typepb.RateLimitUnit_MINUTE}
	resp, err = h.svc.ShouldRateLimit(context.Background(), request("d", 0, d))
	if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Errorf("bare override while down: %v, %v; want OK", resp.GetOverallCode(), err)
	}
}

func TestFailureNewErrors(t *testing.T) {
	fs, err := failsafe.New(failsafe.Config{Primary: failing{}})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]service.Config{
		"failsafe limiter": {Limiter: fs, Failure: &service.FailurePolicy{}},
		"unknown mode":     {Limiter: failing{}, Failure: &service.FailurePolicy{Mode: 9}},
	} {
		if _, err := service.New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	svc, err := service.New(service.Config{Limiter: failing{}, Failure: &service.FailurePolicy{}, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := svc.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// hotKeyStore fails, as a timeout would, every decision on a key that
// holds "hot", and asks its memstore for the others.
type hotKeyStore struct {
	sluice.Limiter
	asked atomic.Int64
}

func (s *hotKeyStore) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if strings.Contains(key, "hot") {
		return sluice.Result{}, context.DeadlineExceeded
	}
	s.asked.Add(1)
	return s.Limiter.AllowN(ctx, key, lim, cost)
}

// TestFailureHotKeyLeavesOtherTenantsOnTheStore: one tenant whose every
// decision times out (rule failure_mode closed) opens only its partition
// of the breaker: 100 other tenants of the same rule are still decided by
// the store (and admitted), save the few whose keys share the hot key's
// partition (a sixteenth on average; more than 25 of 100 has a chance
// under one in a million). With one breaker, all 100 were refused.
func TestFailureHotKeyLeavesOtherTenantsOnTheStore(t *testing.T) {
	clock := clocktest.At(time.Unix(t0, 0))
	mem := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	st := &hotKeyStore{Limiter: mem}
	h := start(t, t0, service.Config{Rules: modeRules(10, config.Second), Limiter: st,
		Failure: &service.FailurePolicy{Mode: failsafe.Closed, Local: newLocal(t, clock), Clock: clock, Threshold: 3}})
	ctx := context.Background()
	for range 50 {
		resp, err := h.svc.ShouldRateLimit(ctx, request("d", 0, desc("closed", "hot")))
		if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("the hot tenant while its store calls time out: %v %v, want OVER_LIMIT (closed)", resp.GetOverallCode(), err)
		}
	}
	refused := 0
	for i := range 100 {
		resp, err := h.svc.ShouldRateLimit(ctx, request("d", 0, desc("closed", "tenant"+strconv.Itoa(i))))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() != pb.RateLimitResponse_OK {
			refused++
		}
	}
	if refused > 25 || st.asked.Load() != int64(100-refused) || !h.svc.StoreAvailable() {
		t.Errorf("other tenants: %d of 100 refused, %d decided by the store, store available %v; want at most 25, the rest by the store, available",
			refused, st.asked.Load(), h.svc.StoreAvailable())
	}
}
