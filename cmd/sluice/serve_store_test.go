package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testlog"
)

// serve starts while Redis is down: it applies the failure mode (open,
// given here: admit) and reconnects by itself once Redis is up, when the limit is
// enforced again. /healthcheck answers 200 while degraded, unless
// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION is true, as in envoyproxy/ratelimit:
// then 503 until the store answers.
func TestServeStartsWithoutRedisAndReconnects(t *testing.T) {
	redis := redistest.StartServer(t)
	redis.Kill()
	path := filepath.Join(t.TempDir(), "rl.yaml")
	// One per hour: the second request is a 429 when Redis decides, a 200
	// when the failure mode (open) does.
	writeFile(t, path, "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1\n")
	store := "redis://" + redis.Addr

	t.Run("default health", func(t *testing.T) {
		s := launch(t, "-config", path, "-store", store, "-failure-mode", "open")
		if a, b := post(t, s.url, reqK), post(t, s.url, reqK); a != 200 || b != 200 {
			t.Errorf("failure mode open while Redis is down: %d, %d, want 200s", a, b)
		}
		if got := getStatus(t, s.url+"/healthcheck"); got != 200 {
			t.Errorf("/healthcheck while degraded: %d, want 200", got)
		}
		s.stop(t)
	})

	t.Setenv("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true")
	s := launch(t, "-config", path, "-store", store, "-failure-mode", "open")
	if got := getStatus(t, s.url+"/healthcheck"); got != 503 {
		t.Errorf("/healthcheck with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION while Redis is down: %d, want 503", got)
	}
	if a, b := post(t, s.url, reqK), post(t, s.url, reqK); a != 200 || b != 200 {
		t.Errorf("failure mode open while Redis is down: %d, %d, want 200s", a, b)
	}
	redis.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for post(t, s.url, reqK) != 429 || getStatus(t, s.url+"/healthcheck") != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected 10 s after Redis came back: %s", s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond) // polling a reconnect
	}
}

// The memory store's byte budget is a flag, and its size and evictions
// are metrics.
func TestServeMemoryStoreBudgetAndMetrics(t *testing.T) {
	s := launch(t, "-memory-max-bytes", "1048576")
	post(t, s.url, `{"domain":"example","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`)
	for name, want := range map[string]func(float64) bool{
		"sluice_memstore_max_bytes":        func(v float64) bool { return v == 1<<20 },
		"sluice_memstore_keys":             func(v float64) bool { return v == 1 },
		"sluice_memstore_bytes":            func(v float64) bool { return v > 0 },
		"sluice_memstore_evictions_total":  func(v float64) bool { return v == 0 },
		"sluice_memstore_remembered_total": func(v float64) bool { return v == 0 },
		"sluice_memstore_merged_total":     func(v float64) bool { return v == 0 },
	} {
		if v := metric(t, s.url, name); !want(v) {
			t.Errorf("%s = %v", name, v)
		}
	}
}

// serve's sizes take the spelling proxy's sizes take (NGINX's: 1m, 512k),
// as flags and as environment variables: before, -memory-max-bytes 1m was
// "invalid value" while -client-max-body-size 1m was the only way.
func TestServeSizesTakeTheProxysSpelling(t *testing.T) {
	s := launch(t, "-memory-max-bytes", "1m", "-json-max-bytes-in-flight", "2m")
	post(t, s.url, `{"domain":"example","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`)
	if v := metric(t, s.url, "sluice_memstore_max_bytes"); v != 1<<20 {
		t.Errorf("-memory-max-bytes 1m: sluice_memstore_max_bytes = %v, want %d", v, 1<<20)
	}
	t.Setenv("MEMSTORE_MAX_BYTES", "2m")
	s = launch(t)
	if v := metric(t, s.url, "sluice_memstore_max_bytes"); v != 2<<20 {
		t.Errorf("MEMSTORE_MAX_BYTES=2m: sluice_memstore_max_bytes = %v, want %d", v, 2<<20)
	}
	var out, errb testlog.Buffer
	if code := runServe(context.Background(), []string{"-memory-max-bytes", "1q"}, &out, &errb); code != 2 {
		t.Errorf("-memory-max-bytes 1q: exit %d, want 2; stderr %q", code, errb.String())
	}
}
