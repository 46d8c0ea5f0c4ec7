package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// healthStatus returns the status of GET /healthcheck.
func healthStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// serve starts while Redis is down: it applies the failure mode (open:
// admit) and reconnects by itself once Redis is up, when the limit is
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
		s := launch(t, "-config", path, "-store", store)
		if a, b := post(t, s.url, reqK), post(t, s.url, reqK); a != 200 || b != 200 {
			t.Errorf("failure mode open while Redis is down: %d, %d, want 200s", a, b)
		}
		if got := healthStatus(t, s.url); got != 200 {
			t.Errorf("/healthcheck while degraded: %d, want 200", got)
		}
		s.stop(t)
	})

	t.Setenv("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true")
	s := launch(t, "-config", path, "-store", store)
	if got := healthStatus(t, s.url); got != 503 {
		t.Errorf("/healthcheck with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION while Redis is down: %d, want 503", got)
	}
	if a, b := post(t, s.url, reqK), post(t, s.url, reqK); a != 200 || b != 200 {
		t.Errorf("failure mode open while Redis is down: %d, %d, want 200s", a, b)
	}
	redis.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for post(t, s.url, reqK) != 429 || healthStatus(t, s.url) != 200 {
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
		"sluice_memstore_max_bytes":       func(v float64) bool { return v == 1<<20 },
		"sluice_memstore_keys":            func(v float64) bool { return v == 1 },
		"sluice_memstore_bytes":           func(v float64) bool { return v > 0 },
		"sluice_memstore_evictions_total": func(v float64) bool { return v == 0 },
	} {
		if v := metric(t, s.url, name); !want(v) {
			t.Errorf("%s = %v", name, v)
		}
	}
}
