package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/service"
)

// During an outage, the breaker's log line tells the truth: the failure
// mode that answers (open here, not the breaker's internal closed), and
// totals that match the store-error metric.
func TestFailureLogMatchesModeAndMetrics(t *testing.T) {
	clock, fl := flakyStore(t)
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

// counterSum returns the sum of the counter name over its series, or
// over those whose label is value when label is not "".
func counterSum(t *testing.T, h *harness, name string, labelValue ...string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(labelValue) == 2 && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == labelValue[0] && l.GetValue() == labelValue[1]
			}) {
				continue
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestStoreBackLineCountsDecisionsWithoutTheStore: when the store answers
// again, the "store is back" line says how many decisions were made
// without it, and that figure (with the lines before it) is the metric
// sluice_rls_fallback_decisions_total, counted per rule and failure mode.
func TestStoreBackLineCountsDecisionsWithoutTheStore(t *testing.T) {
	clock, fl := flakyStore(t)
	fl.down.Store(true)
	var logs testlog.Buffer
	h := start(t, t0, service.Config{Rules: modeRules(1000, config.Hour), Limiter: fl,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Failure: &service.FailurePolicy{Mode: failsafe.Open, Local: newLocal(t, clock), Clock: clock,
			Threshold: 3, Backoff: time.Second}})
	ctx := context.Background()
	for _, key := range []string{"default", "closed", "local"} {
		for range 40 {
			if _, err := h.svc.ShouldRateLimit(ctx, request("d", 0, desc(key, "x"))); err != nil {
				t.Fatal(err)
			}
		}
	}
	fl.down.Store(false)
	clock.Advance(2 * time.Second) // past the back-off: the next calls probe
	for _, key := range []string{"default", "closed", "local"} {
		if _, err := h.svc.ShouldRateLimit(ctx, request("d", 0, desc(key, "x"))); err != nil {
			t.Fatal(err)
		}
	}
	metric := counterSum(t, h, "sluice_rls_fallback_decisions_total")
	if metric != 120 {
		t.Fatalf("fallback decisions metric %v, want 120 (every decision while the store was down)", metric)
	}
	for mode, want := range map[string]float64{"open": 40, "closed": 40, "local": 40} {
		if got := counterSum(t, h, "sluice_rls_fallback_decisions_total", "mode", mode); got != want {
			t.Errorf("fallback decisions of mode %s: %v, want %v", mode, got, want)
		}
	}
	var back string
	lineSum := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var n int
		if i := strings.Index(line, " fallback_decisions="); i >= 0 {
			fmt.Sscanf(line[i+len(" fallback_decisions="):], "%d", &n)
			lineSum += n
		}
		if strings.Contains(line, "store is back") {
			back = line
		}
	}
	if back == "" || !strings.Contains(back, "fallback_decisions_total=120") || lineSum != 120 {
		t.Errorf("the log does not add up to the metric's 120 decisions without the store (lines add %d): back line %q\nall: %s",
			lineSum, back, logs.String())
	}
}
