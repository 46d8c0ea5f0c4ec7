package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// LOG_FORMAT=json writes one JSON object per line with
// envoyproxy/ratelimit's keys (@timestamp, @message, and level with
// logrus's names), so that the log pipelines built for it read Sluice's;
// text is the default, and an unknown format is refused.
func TestLogHandlerJSONHasEnvoyRatelimitsKeys(t *testing.T) {
	var b bytes.Buffer
	h, err := LogHandler("JSON", &b, &slog.HandlerOptions{Level: slog.LevelDebug})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(h)
	log.Warn("config reloaded", "config", "/etc/rl", slog.Group("g", "level", "inner"))
	log.Debug("d")
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %s", len(lines), b.String())
	}
	w := lines[0]
	if w["@message"] != "config reloaded" || w["level"] != "warning" || w["config"] != "/etc/rl" {
		t.Errorf("warning line: %v", w)
	}
	if ts, ok := w["@timestamp"].(string); !ok {
		t.Errorf("no @timestamp: %v", w)
	} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("@timestamp %q: %v", ts, err)
	}
	if g, _ := w["g"].(map[string]any); g["level"] != "inner" {
		t.Errorf("an attribute named level inside a group was renamed: %v", w)
	}
	if _, ok := w["msg"]; ok {
		t.Errorf("slog's msg key is left: %v", w)
	}
	if lines[1]["level"] != "debug" {
		t.Errorf("debug line: %v", lines[1])
	}

	for _, f := range []string{"", "text", "TEXT"} {
		b.Reset()
		h, err := LogHandler(f, &b, nil)
		if err != nil {
			t.Fatalf("%q: %v", f, err)
		}
		slog.New(h).Info("hello")
		if !strings.Contains(b.String(), "msg=hello") {
			t.Errorf("LOG_FORMAT=%q: %q, want slog's text", f, b.String())
		}
	}
	if _, err := LogHandler("logfmt", &b, nil); err == nil {
		t.Error("LOG_FORMAT=logfmt: no error")
	}
}
