package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// During an outage, the breaker's log line tells the truth: the failure
// mode that answers (open here, not the breaker's internal closed), and
// totals that match the store-error metric.
func TestFailureLogMatchesModeAndMetrics(t *testing.T) {
	clock := clocktest.At(time.Unix(t0, 0))
	mem := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	fl := &flaky{Limiter: mem}
	fl.down.Store(true)
	var logs testlog.Buffer
	h := start(t, t0, service.Config{Rules: modeRules(10, config.Second), Limiter: fl,
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Failure: &service.FailurePolicy{Mode: failsafe.Open, Clock: clock}})
	for range 8 {
		if resp, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("default", "x"))); err != nil || resp.GetOverallCode().String() != "OK" {
			t.Fatalf("failure mode open: %v %v", resp, err)
		}
	}
	clock.Advance(11 * time.Second) // past the log interval
	h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("default", "x")))

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	last := lines[len(lines)-1]
	metric := counterSum(t, h, "sluice_rls_store_errors_total")
	if metric != 9 {
		t.Fatalf("store errors metric %v, want 9", metric)
	}
	for _, want := range []string{"mode=open", fmt.Sprintf("fallback_decisions_total=%d", int(metric))} {
		if !strings.Contains(last, want) {
			t.Errorf("log line %q lacks %q (store_errors_total metric %v)\nall: %s", last, want, metric, logs.String())
		}
	}
}

// counterSum returns the sum of the counter name over its labels.
func counterSum(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
