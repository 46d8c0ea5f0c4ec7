package service_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/service"
)

// At debug level the service logs each descriptor's decision, as
// envoyproxy/ratelimit logs the rule it found and the cache key it
// used: the domain, the matched rule's full key, the store key and the
// code; a descriptor that matches no rule is logged with no rule. At info
// level nothing is logged per request. Before, nothing was logged at
// either level.
func TestDebugLogNamesEachDecision(t *testing.T) {
	var logs testlog.Buffer
	rules := (&fakeRules{domain: "d"}).add(fixed("d.user", 1, config.Minute), "user", "")
	h := start(t, t0, service.Config{Rules: rules,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for range 2 {
		if _, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("user", "alice"), desc("other", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	var got []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if m["level"] == "DEBUG" {
			got = append(got, m)
		}
	}
	if len(got) != 4 {
		t.Fatalf("%d debug lines, want 4 (2 requests of 2 descriptors):\n%s", len(got), logs.String())
	}
	for i, want := range []struct{ rule, code string }{{"d.user", "OK"}, {"", "OK"}, {"d.user", "OVER_LIMIT"}, {"", "OK"}} {
		m := got[i]
		key, _ := m["key"].(string)
		if m["domain"] != "d" || m["rule"] != want.rule || m["code"] != want.code || (want.rule != "") != strings.Contains(key, "alice") {
			t.Errorf("line %d: %v; want domain d, rule %q, code %s, the store key when a rule matched", i, m, want.rule, want.code)
		}
	}

	logs.Reset()
	info := start(t, t0, service.Config{Rules: rules, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	info.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("user", "alice")))
	if logs.String() != "" {
		t.Errorf("at info level: %q, want nothing", logs.String())
	}
}

// The client's values in a debug line are bounded: a 64 KiB descriptor
// value makes a line of at most a few hundred bytes.
func TestDebugLogBoundsClientValues(t *testing.T) {
	var logs testlog.Buffer
	rules := (&fakeRules{domain: "d"}).add(fixed("d.user", 1, config.Minute), "user", "")
	h := start(t, t0, service.Config{Rules: rules,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	long := strings.Repeat("v", 64<<10)
	if _, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("user", long), desc("other", long))); err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		if len(l) > 1024 {
			t.Errorf("a debug line of %d bytes: %.200s…", len(l), l)
		}
	}
	if logs.String() == "" {
		t.Error("no debug line")
	}
}
