package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/redisstore"
)

// manualTick is a renewal ticker that fires when the test sends on it.
type manualTick chan time.Time

func (m manualTick) tick(time.Duration) (<-chan time.Time, func()) { return m, func() {} }

// Two processes (stores with their own connections) on one Redis admit
// exactly max holders of a key together, a released slot is taken again,
// and the slot of a holder that died without releasing comes back once its
// lease's TTL has passed, while a holder that renews keeps its slot.
func TestLeasesShareAnInFlightLimit(t *testing.T) {
	ctx := context.Background()
	url := singleURL(t)
	clock := clocktest.New()
	const ttl = 9 * time.Second
	tickA, tickB := make(manualTick), make(manualTick)
	a, err := redisstore.NewLeases(open(t, url, clock), redisstore.LeasesConfig{TTL: ttl, Tick: tickA.tick})
	if err != nil {
		t.Fatal(err)
	}
	b, err := redisstore.NewLeases(open(t, url, clock), redisstore.LeasesConfig{TTL: ttl, Tick: tickB.tick})
	if err != nil {
		t.Fatal(err)
	}
	key := "leases:" + time.Now().Format(time.RFC3339Nano)

	relA, ok, err := a.Acquire(ctx, key, 2)
	if err != nil || !ok {
		t.Fatalf("first on a: ok=%v err=%v", ok, err)
	}
	relB, ok, err := b.Acquire(ctx, key, 2)
	if err != nil || !ok {
		t.Fatalf("first on b: ok=%v err=%v", ok, err)
	}
	for name, l := range map[string]*redisstore.Leases{"a": a, "b": b} {
		if _, ok, err := l.Acquire(ctx, key, 2); err != nil || ok {
			t.Fatalf("third on %s: ok=%v err=%v; want refused", name, ok, err)
		}
	}
	relB()
	relB() // a second release is harmless
	relB2, ok, err := b.Acquire(ctx, key, 2)
	if err != nil || !ok {
		t.Fatalf("after a release: ok=%v err=%v; want the slot again", ok, err)
	}
	// Its holder dies: never renewed, and released only when the test
	// ends, to stop its goroutine.
	defer relB2()

	// a's first holder renews 6s in (two sends: the second returns once
	// the first renewal is done); the dead one does not.
	clock.Advance(6 * time.Second)
	tickA <- clock.Now()
	tickA <- clock.Now()
	clock.Advance(ttl - 6*time.Second)
	rel, ok, err := b.Acquire(ctx, key, 2)
	if err != nil || !ok {
		t.Fatalf("TTL after the holder died: ok=%v err=%v; want its slot back", ok, err)
	}
	defer rel()
	if _, ok, err := b.Acquire(ctx, key, 2); err != nil || ok {
		t.Fatalf("the renewed holder lost its slot: ok=%v err=%v", ok, err)
	}
	relA()
}

// NewLeases refuses a TTL too short to renew and a nil Store.
func TestNewLeasesRefusesBadConfig(t *testing.T) {
	if _, err := redisstore.NewLeases(nil, redisstore.LeasesConfig{}); err == nil {
		t.Error("nil Store accepted")
	}
	s := open(t, singleURL(t), nil)
	if _, err := redisstore.NewLeases(s, redisstore.LeasesConfig{TTL: time.Microsecond}); err == nil {
		t.Error("TTL of 1µs accepted")
	}
}
