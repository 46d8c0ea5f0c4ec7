package relief_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// peekCounting is a memstore that counts the peeks reaching it.
type peekCounting struct {
	*memstore.Store
	peeks atomic.Int64
}

func (p *peekCounting) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	p.peeks.Add(1)
	return p.Store.Peek(ctx, key, lim)
}

// TestOverLimitCachePeekAnswersFromCache: while a denial is cached, a peek
// costs no call to the inner limiter and says what the store would: remaining
// 0 and the key's reset.
func TestOverLimitCachePeekAnswersFromCache(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	inner := &peekCounting{Store: newMem(t, clock)}
	c := relief.NewOverLimitCache(inner, relief.CacheConfig{Clock: clock})
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 3, Period: time.Minute}
	if _, err := c.AllowN(ctx, "k", lim, 3); err != nil {
		t.Fatal(err)
	}
	if r, err := c.AllowN(ctx, "k", lim, 1); err != nil {
		t.Fatal(err)
	} else if r.Allowed {
		t.Fatal("the 4th unit of 3 was admitted")
	}
	clock.Advance(time.Second)
	want, err := inner.Peek(ctx, "k", lim)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Peek(ctx, "k", lim)
	if err != nil || got != want {
		t.Fatalf("Peek over a cached denial = %+v, %v; the store says %+v", got, err, want)
	}
	if n := inner.peeks.Load(); n != 1 {
		t.Errorf("%d peeks reached the store, want only the test's own", n)
	}
}

// TestPeekNeedsAPeeker: a wrapper around a limiter that cannot peek fails
// a peek with errors.ErrUnsupported.
func TestPeekNeedsAPeeker(t *testing.T) {
	clock := clocktest.New()
	plain := &counting{Limiter: newMem(t, clock)} // hides memstore's Peek
	lim := sluice.PerMinute(5)
	for name, pk := range map[string]sluice.Peeker{
		"OverLimitCache": relief.NewOverLimitCache(plain, relief.CacheConfig{Clock: clock}),
		"Hybrid":         relief.NewHybrid(plain, plain, nil),
		"Batcher":        relief.NewBatcher(plain, relief.BatchConfig{Clock: clock}),
	} {
		if _, err := pk.Peek(context.Background(), "k", lim); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s over a limiter that cannot peek: %v, want errors.ErrUnsupported", name, err)
		}
	}
}
