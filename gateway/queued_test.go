package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The queues of all routes together hold at most MaxQueued requests: each
// waiting request holds its connection's or stream's memory, and a key
// per request (a header the client picks) makes every queue short and
// their number unbounded. Beyond it a request that would wait is answered
// 503 at once, and is charged nothing; what waits is served as before.
func TestQueuedRequestsBoundedOverAllKeys(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, `
limits: [{name: q, key: "header:X-Key", rate: 1r/m, burst: 5}]
routes: [{name: all, match: /, limits: [q]}]
`, up)
	cfg.MaxQueued = 3
	var waiting atomic.Int64
	release := make(chan struct{})
	cfg.Wait = func(ctx context.Context, d time.Duration) error {
		waiting.Add(1)
		defer waiting.Add(-1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g := newGateway(t, cfg)
	send := func(key string) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", key)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w.Code
	}
	// Each key's first request passes; its second would wait a minute.
	var wg sync.WaitGroup
	codes := make(chan int, 10)
	for i := range 5 {
		key := "k" + strconv.Itoa(i)
		if code := send(key); code != 200 {
			t.Fatalf("%s first: %d", key, code)
		}
		wg.Go(func() { codes <- send(key) })
	}
	// Three wait; the two beyond MaxQueued are answered 503 at once.
	for range 2 {
		select {
		case code := <-codes:
			if code != http.StatusServiceUnavailable {
				t.Errorf("a request beyond MaxQueued: %d, want 503", code)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("requests beyond MaxQueued wait too (%d waiting)", waiting.Load())
		}
	}
	if n := waiting.Load(); n != 3 {
		t.Errorf("%d waiting, want 3", n)
	}
	close(release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("a request that waited: %d, want 200", code)
		}
	}
	if n := up.hits.Load(); n != 5+3 {
		t.Errorf("the upstream saw %d, want 8", n)
	}
}
