package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/service"
)

const localRuleYAML = `domain: d
descriptors:
  - key: open
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: local
    rate_limit: {unit: second, requests_per_unit: 10, failure_mode: local}
`

const openRulesYAML = `domain: d
descriptors:
  - key: open
    rate_limit: {unit: second, requests_per_unit: 1}
`

// The Service owns no store: a failure policy without a Local store cannot
// serve local mode, and says so when the rules are loaded, naming the
// rule's file and line, rather than at the first failed decision.
func TestFailureLocalModeNeedsLocalStore(t *testing.T) {
	if _, err := service.New(service.Config{Limiter: failing{}, Logger: discard(),
		Failure: &service.FailurePolicy{Mode: failsafe.Local}}); err == nil {
		t.Error("New with Mode local and no Local store: no error")
	}

	_, err := service.New(service.Config{Limiter: failing{}, Logger: discard(),
		Failure: &service.FailurePolicy{}, Rules: configtest.Parse(t, localRuleYAML)})
	var ce *config.Error
	if !errors.As(err, &ce) || ce.File != "rules.yaml" || ce.Line != 6 || !strings.Contains(err.Error(), "failure_mode: local") {
		t.Errorf("New with a local rule and no Local store: %v, want a config error at rules.yaml:6", err)
	}

	// A reload to such rules is refused, and the running rules stay.
	svc, err := service.New(service.Config{Limiter: newLocal(t, nil), Logger: discard(),
		Failure: &service.FailurePolicy{}, Rules: configtest.Parse(t, openRulesYAML)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SetRules(configtest.Parse(t, localRuleYAML)); err == nil {
		t.Error("SetRules with a local rule and no Local store: no error")
	}
	// The running rule (1 per second) still answers; the refused one
	// would allow 10.
	resp, err := svc.ShouldRateLimit(context.Background(), request("d", 2, desc("open", "x")))
	if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("after the refused reload, 2 hits on open: %v, %v; want OVER_LIMIT by the running rule", resp.GetOverallCode(), err)
	}

	// With a Local store, the same rules load.
	if _, err := service.New(service.Config{Limiter: failing{}, Logger: discard(),
		Failure: &service.FailurePolicy{Local: newLocal(t, nil)}, Rules: configtest.Parse(t, localRuleYAML)}); err != nil {
		t.Errorf("New with a local rule and a Local store: %v", err)
	}
}
