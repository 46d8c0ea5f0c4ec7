package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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

// LOCAL_CACHE_SIZE_IN_BYTES above 0 is the over-limit cache's budget in
// bytes, as envoyproxy/ratelimit reads it (the size of its cache); unset,
// the cache keeps relief's default. Before, the size was read only as
// "on" and the cache held up to 32 MiB whatever it said.
func TestLocalCacheSizeIsTheCachesBudget(t *testing.T) {
	for _, tt := range []struct {
		env  string // "-": unset
		want int64
	}{{"-", 0}, {"1048576", 1 << 20}, {"100000000", 100_000_000}} {
		if tt.env != "-" {
			t.Setenv("LOCAL_CACHE_SIZE_IN_BYTES", tt.env)
		}
		s, code, done := parseServeFlags([]string{"-store", "redis://127.0.0.1:1"}, &bytes.Buffer{}, &bytes.Buffer{})
		if done {
			t.Fatalf("LOCAL_CACHE_SIZE_IN_BYTES=%s: exit %d", tt.env, code)
		}
		if got := overLimitCacheConfig(s.o.localCacheBytes).MaxBytes; got != tt.want {
			t.Errorf("LOCAL_CACHE_SIZE_IN_BYTES=%s: the cache's MaxBytes %d, want %d (0: relief's default)", tt.env, got, tt.want)
		}
	}
}

// A malformed LOCAL_CACHE_SIZE_IN_BYTES is refused with one error naming
// it: before, the variable was read twice (the cache's switch and its
// budget) and its error was given twice.
func TestMalformedLocalCacheSizeIsReportedOnce(t *testing.T) {
	t.Setenv("LOCAL_CACHE_SIZE_IN_BYTES", "lots")
	s, code, done := parseServeFlags([]string{"-store", "redis://127.0.0.1:1"}, &bytes.Buffer{}, &bytes.Buffer{})
	if done {
		t.Fatalf("exit %d", code)
	}
	if n := strings.Count(errors.Join(s.envErr...).Error(), "LOCAL_CACHE_SIZE_IN_BYTES"); n != 1 {
		t.Errorf("%d errors name LOCAL_CACHE_SIZE_IN_BYTES, want 1: %v", n, s.envErr)
	}
}

// A negative LOCAL_CACHE_SIZE_IN_BYTES is refused, naming the variable:
// before, it turned the over-limit cache off without a word, where
// envoyproxy/ratelimit (which turns its cache off only at 0) would run a
// cache of its smallest size.
func TestNegativeLocalCacheSizeIsRefused(t *testing.T) {
	t.Setenv("LOCAL_CACHE_SIZE_IN_BYTES", "-1")
	s, code, done := parseServeFlags([]string{"-store", "redis://127.0.0.1:1"}, &bytes.Buffer{}, &bytes.Buffer{})
	if done {
		t.Fatalf("exit %d", code)
	}
	if n := strings.Count(fmt.Sprint(s.envErr), "LOCAL_CACHE_SIZE_IN_BYTES"); n != 1 {
		t.Errorf("%d errors name LOCAL_CACHE_SIZE_IN_BYTES, want 1: %v", n, s.envErr)
	}
}
