package main

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/relief"
)

// The over-limit cache is on by default in front of a remote store (it
// never admits over a limit); LOCAL_CACHE_SIZE_IN_BYTES=0, as
// envoyproxy/ratelimit reads it, or -local-cache=false turns it off. Before,
// it was off unless asked for. The memory store does not name the default
// cache as a setting it does not act on, only one that was given.
func TestServeCachesDenialsByDefaultWithARemoteStore(t *testing.T) {
	for _, tt := range []struct {
		name      string
		args      []string
		env       string // LOCAL_CACHE_SIZE_IN_BYTES; "-" unset
		wantCache bool
		wantMoot  bool
	}{
		{"redis default", []string{"-store", "redis://127.0.0.1:1"}, "-", true, false},
		{"redis LOCAL_CACHE_SIZE_IN_BYTES=0", []string{"-store", "redis://127.0.0.1:1"}, "0", false, false},
		{"redis LOCAL_CACHE_SIZE_IN_BYTES=1000", []string{"-store", "redis://127.0.0.1:1"}, "1000", true, false},
		{"redis -local-cache=false", []string{"-store", "redis://127.0.0.1:1", "-local-cache=false"}, "-", false, false},
		{"memory default", []string{"-store", "memory"}, "-", false, false},
		{"memory -local-cache", []string{"-store", "memory", "-local-cache"}, "-", false, true},
		{"memory LOCAL_CACHE_SIZE_IN_BYTES=1000", []string{"-store", "memory"}, "1000", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "-" {
				t.Setenv("LOCAL_CACHE_SIZE_IN_BYTES", tt.env)
			}
			s, code, done := parseServeFlags(tt.args, &bytes.Buffer{}, &bytes.Buffer{})
			if done {
				t.Fatalf("parse: exit %d", code)
			}
			var logs testlog.Buffer
			st, err := openServeStore(context.Background(), &s.o, false, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, got := st.Limiter.(*relief.OverLimitCache); got != tt.wantCache {
				t.Errorf("over-limit cache in front of the store: %v, want %v (%T)", got, tt.wantCache, st.Limiter)
			}
			if got := slices.Contains(mootFlags(s.fs, &s.o), "-local-cache"); got != tt.wantMoot {
				t.Errorf("-local-cache named as not acted on: %v, want %v", got, tt.wantMoot)
			}
		})
	}
}
