package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// A decision on Redis's clock allocates once, rueidis's reply, for every
// algorithm and for the envoyproxy/ratelimit layout: its key is built in
// pooled memory (an allocation added to the path fails this test).
func TestAllowNAllocatesOnce(t *testing.T) {
	if raceEnabled || testing.CoverMode() != "" {
		t.Skip("allocation counts vary under the race detector and with coverage")
	}
	url := singleURL(t)
	stores := map[string]sluice.Limiter{"sluice": open(t, url, nil), "envoy": openEnvoy(t, url, nil, 0)}
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		for layout, s := range stores {
			if layout == "envoy" && a != sluice.FixedWindow {
				continue
			}
			lim := sluice.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Hour, Burst: 1_000_000}
			key := "allocs:" + a.String() + ":" + layout
			decide := func() {
				if r, err := s.AllowN(ctx, key, lim, 1); err != nil || !r.Allowed {
					t.Fatalf("%+v, %v", r, err)
				}
			}
			for range 100 { // rueidis's connections and buffers made
				decide()
			}
			got := testing.AllocsPerRun(200, decide)
			if got > 1 {
				t.Errorf("%v (%s keys): %.1f allocations per decision, want at most 1", a, layout, got)
			}
		}
	}
}

// A decision whose context is done before Redis answers does not give its
// key's memory back while rueidis may still write it: the decisions after
// it, on another key, are counted on their own key, exactly.
func TestCanceledDecisionKeepsItsKey(t *testing.T) {
	url := singleURL(t)
	for _, layout := range []string{"sluice", "envoy"} {
		t.Run(layout, func(t *testing.T) {
			s := open(t, url, nil)
			if layout == "envoy" {
				s = openEnvoy(t, url, nil, 0)
			}
			lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1_000_000, Period: time.Hour, Burst: 1_000_000}
			ctx := context.Background()
			prefix := "cancel:" + layout + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
			const n = 300
			for i := range n {
				canceled, cancel := context.WithCancel(ctx)
				cancel()
				s.AllowN(canceled, prefix+":victim-"+strconv.Itoa(i), lim, 1) // fails or not: either is fine
				if _, err := s.AllowN(ctx, prefix+":kept", lim, 1); err != nil {
					t.Fatal(err)
				}
			}
			r, err := s.Peek(ctx, prefix+":kept", lim)
			if err != nil {
				t.Fatal(err)
			}
			if got := lim.Rate - r.Remaining; got != n {
				t.Errorf("the kept key counted %d decisions, want %d", got, n)
			}
		})
	}
}

// A concurrency lease is kept under <prefix>:cc:{<key>}, its key built as
// a decision's is.
func TestLeaseKeyLayout(t *testing.T) {
	srv := redistest.Single(t)
	s := open(t, "redis://"+srv.Addr, nil)
	key := "lease-layout:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, ok, _, err := s.Acquire(context.Background(), key, 1, time.Minute); err != nil || !ok {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	want := redisstore.DefaultPrefix + ":cc:{" + key + "}"
	if got := strings.TrimSpace(srv.Do(t, "EXISTS", want)); got != "1" {
		t.Errorf("EXISTS %s: %s, want 1", want, got)
	}
}
