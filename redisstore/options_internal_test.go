package redisstore

import (
	"testing"
	"time"
)

// Config.FlushDelay is rueidis's MaxFlushDelay (envoyproxy/ratelimit's
// REDIS_PIPELINE_WINDOW), and Config.Connections its PipelineMultiplex,
// the connections rounded down to a power of two.
func TestClientOption(t *testing.T) {
	for _, tt := range []struct {
		conns, multiplex int
	}{{0, 0}, {1, -1}, {2, 1}, {3, 1}, {10, 3}, {1000, 8}} {
		opt, err := clientOption(Config{URL: "redis://127.0.0.1:6379", Connections: tt.conns, FlushDelay: 20 * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		if opt.PipelineMultiplex != tt.multiplex {
			t.Errorf("Connections %d: PipelineMultiplex %d, want %d", tt.conns, opt.PipelineMultiplex, tt.multiplex)
		}
		if opt.MaxFlushDelay != 20*time.Microsecond {
			t.Errorf("MaxFlushDelay %v, want 20µs", opt.MaxFlushDelay)
		}
	}
	if _, err := clientOption(Config{URL: "redis://127.0.0.1:6379", Connections: -1}); err == nil {
		t.Error("Connections -1: no error")
	}
	// Config.Timeout (REDIS_TIMEOUT) bounds connecting and every reply.
	opt, err := clientOption(Config{URL: "redis://127.0.0.1:6379", Timeout: 3 * time.Second})
	if err != nil || opt.Dialer.Timeout != 3*time.Second || opt.ConnWriteTimeout != 3*time.Second {
		t.Errorf("Timeout 3s: dial %v, reply %v, %v; want 3s, 3s", opt.Dialer.Timeout, opt.ConnWriteTimeout, err)
	}
}
