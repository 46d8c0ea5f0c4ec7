package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// Many servers (here: stores with their own connections) share one
// in-flight limit: never more than max leases at once, a released slot is
// taken again, and the slot of a holder that vanished comes back when its
// lease expires.
func TestConcurrencyLimit(t *testing.T) {
	ctx := context.Background()
	url := singleURL(t)
	clock := clocktest.New()
	a, b := open(t, url, clock), open(t, url, clock)
	key := "inflight:" + time.Now().Format(time.RFC3339Nano)

	var leases []redisstore.Lease
	for i := range 5 {
		s := a
		if i%2 == 1 {
			s = b
		}
		l, ok, _, err := s.Acquire(ctx, key, 5, 10*time.Second)
		if err != nil || !ok {
			t.Fatalf("acquire %d: ok=%v err=%v", i, ok, err)
		}
		leases = append(leases, l)
	}
	_, ok, retry, err := a.Acquire(ctx, key, 5, 10*time.Second)
	if err != nil || ok || retry != 10*time.Second {
		t.Fatalf("6th acquire: ok=%v retry=%v err=%v; want refused, retry 10s", ok, retry, err)
	}
	if err := b.Release(ctx, leases[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, leases[0]); err != nil {
		t.Fatalf("a second release: %v", err)
	}
	if _, ok, _, err := a.Acquire(ctx, key, 5, 10*time.Second); err != nil {
		t.Fatal(err)
	} else if !ok {
		t.Fatal("a released slot was not given again")
	}
	// The holders vanish without releasing; 4s in, one renews.
	clock.Advance(4 * time.Second)
	if err := a.Renew(ctx, leases[1]); err != nil {
		t.Fatal(err)
	}
	clock.Advance(6 * time.Second)
	got := 0
	for range 10 {
		if _, ok, _, err := b.Acquire(ctx, key, 5, 10*time.Second); err != nil {
			t.Fatal(err)
		} else if ok {
			got++
		}
	}
	if got != 4 {
		t.Fatalf("after the leases expired %d slots came back, want 4 (one was renewed)", got)
	}
	clock.Advance(11 * time.Second)
	if err := a.Renew(ctx, leases[1]); !errors.Is(err, redisstore.ErrLeaseLost) {
		t.Fatalf("renewing an expired lease: %v, want ErrLeaseLost", err)
	}
}

// 64 goroutines on two stores never hold more than max at once.
func TestConcurrencyLimitContended(t *testing.T) {
	ctx := context.Background()
	url := singleURL(t)
	stores := []*redisstore.Store{open(t, url, nil), open(t, url, nil)}
	key := "inflight-contended:" + time.Now().Format(time.RFC3339Nano)
	const max = 3
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			s := stores[g%2]
			for range 20 {
				l, ok, _, err := s.Acquire(ctx, key, max, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				held.Add(-1)
				if err := s.Release(ctx, l); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > max || p == 0 {
		t.Fatalf("peak holders %d, want 1 to %d", p, max)
	}
}

func TestConcurrencyBadInput(t *testing.T) {
	s := open(t, singleURL(t), nil)
	ctx := context.Background()
	for _, tt := range []struct {
		key  string
		max  int
		ttl  time.Duration
		want error
	}{
		{"", 1, time.Second, sluice.ErrInvalidKey},
		{"k", 0, time.Second, sluice.ErrInvalidLimit},
		{"k", 1, 0, sluice.ErrInvalidLimit},
	} {
		if _, _, _, err := s.Acquire(ctx, tt.key, tt.max, tt.ttl); !errors.Is(err, tt.want) {
			t.Errorf("Acquire(%q, %d, %v): %v, want %v", tt.key, tt.max, tt.ttl, err, tt.want)
		}
	}
}

// The in-flight set lives as long as its latest lease and no longer: an
// acquire or a renew gives it the latest lease's expiry, a release the
// expiry of the lease left last, and releasing the last lease deletes it.
func TestConcurrencySetExpiresWithItsLatestLease(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Single(t)
	clock := clocktest.New()
	s := open(t, "redis://"+srv.Addr, clock)
	raw, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	key := "inflight-ttl:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// expiry checks the set's time to live, within the second it takes
	// Redis to count; 0 wants no set.
	expiry := func(step string, want time.Duration) {
		t.Helper()
		ms, err := raw.Do(ctx, raw.B().Pttl().Key(redisstore.DefaultPrefix+":cc:{"+key+"}").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		got := time.Duration(ms) * time.Millisecond
		if want == 0 && ms != -2 || want > 0 && (got > want || got < want-time.Second) {
			t.Errorf("%s: the set's time to live is %v (PTTL %d), want %v", step, got, ms, want)
		}
	}
	acquire := func(ttl time.Duration) redisstore.Lease {
		t.Helper()
		l, ok, _, err := s.Acquire(ctx, key, 5, ttl)
		if err != nil || !ok {
			t.Fatalf("acquire: ok=%v err=%v", ok, err)
		}
		return l
	}
	short := acquire(10 * time.Second)
	expiry("one lease of 10s", 10*time.Second)
	long := acquire(30 * time.Second)
	expiry("a second lease of 30s", 30*time.Second)
	clock.Advance(5 * time.Second)
	if err := s.Renew(ctx, short); err != nil {
		t.Fatal(err)
	}
	expiry("5s on, the 10s lease renewed", 25*time.Second)
	if err := s.Release(ctx, long); err != nil {
		t.Fatal(err)
	}
	expiry("the 30s lease released", 10*time.Second)
	if err := s.Release(ctx, short); err != nil {
		t.Fatal(err)
	}
	expiry("every lease released", 0)
}
