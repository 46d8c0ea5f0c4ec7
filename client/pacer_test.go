package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// limited returns a handler protected by httplimit with one global policy
// on a memstore of its own; inside a synctest bubble it runs on fake time.
func limited(t *testing.T, lim sluice.Limit) http.Handler {
	t.Helper()
	store := memstore.New(memstore.Config{SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	wrap, err := httplimit.Wrap(httplimit.Config{
		Settings: httplimit.Settings{Limiter: store, Logger: quiet},
		Policies: []httplimit.Policy{{Name: "global", Limit: lim, Key: httplimit.Global()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
}

// inProcess is a RoundTripper that serves requests with a handler, without
// a network, so that it can run in a synctest bubble.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	p.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// tally counts responses by status, and errors.
type tally struct {
	mu     sync.Mutex
	status map[int]int
	errs   []error
}

func (c *tally) add(resp *http.Response, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == nil {
		c.status = map[int]int{}
	}
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.status[resp.StatusCode]++
}

// getWith is rt's round trip of a GET of url under ctx.
func getWith(ctx context.Context, rt http.RoundTripper, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return rt.RoundTrip(req)
}

// gaveUp reports whether err ends a sender's run: the pacer would have
// waited past ctx's deadline (ErrWaitTooLong), or ctx is done.
func gaveUp(ctx context.Context, err error) bool {
	return err != nil && (errors.Is(err, client.ErrWaitTooLong) || ctx.Err() != nil)
}

// load runs send in n goroutines for d (send stops when its ctx is done),
// waits for them all, and returns what they counted in the tally.
func load(n int, d time.Duration, send func(ctx context.Context, c *tally)) *tally {
	var c tally
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for range n {
		wg.Go(func() { send(ctx, &c) })
	}
	wg.Wait()
	return &c
}

// offer sends requests through rt at the given rate for d, each in a
// goroutine of its own, and waits for them all.
func offer(rt http.RoundTripper, url string, rate int, d time.Duration) *tally {
	var c tally
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		<-tick.C
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			c.add(rt.RoundTrip(req))
		})
	}
	wg.Wait()
	return &c
}

// A paced client offering twice the server's rate gets no 429; without the
// pacer the same load does. Synctest's clock drives the server's limiter
// and the pacer alike.
func TestPacerTwiceTheRate(t *testing.T) {
	for _, paced := range []bool{true, false} {
		name := "paced"
		if !paced {
			name = "unpaced"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rt http.RoundTripper = inProcess{limited(t, sluice.PerSecond(10))}
				if paced {
					rt = &client.Pacer{Base: rt, Limit: sluice.PerSecond(9)}
				}
				t0 := time.Now()
				c := offer(rt, "http://api.test/", 20, 10*time.Second)
				if len(c.errs) > 0 {
					t.Fatalf("errors: %v", c.errs)
				}
				if !paced {
					if c.status[429] == 0 {
						t.Fatalf("unpaced at twice the rate: %v, want some 429s", c.status)
					}
					return
				}
				if c.status[429] != 0 || c.status[200] != 200 {
					t.Fatalf("paced: %v, want 200 × 200 and no 429", c.status)
				}
				// 200 requests at 9/s with a first burst of 9: about 21 s.
				if el := time.Since(t0); el < 20*time.Second || el > 23*time.Second {
					t.Errorf("paced 200 requests in %v, want about 21s", el)
				}
			})
		})
	}
}

// A pacer set above what the server allows adapts to the RateLimit field
// and gets no 429; with IgnoreServer it does.
func TestPacerAdapts(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		name := "adapting"
		if ignore {
			name = "ignoring the server"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := inProcess{limited(t, sluice.PerSecond(10))}
				p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(20).WithBurst(1), IgnoreServer: ignore}
				c := load(4, 30*time.Second, func(ctx context.Context, c *tally) {
					for ctx.Err() == nil {
						resp, err := getWith(ctx, p, "http://api.test/")
						if gaveUp(ctx, err) {
							return
						}
						c.add(resp, err)
					}
				})
				if len(c.errs) > 0 {
					t.Fatalf("errors: %v", c.errs)
				}
				if ignore {
					if c.status[429] == 0 {
						t.Fatalf("%v, want some 429s from a pacer above the server's limit", c.status)
					}
					return
				}
				// The server admits at most 10 + 10·30 = 310 in 30 s; a report's t
				// is an upper bound, so expect well over half of that.
				if c.status[429] != 0 || c.status[200] < 150 {
					t.Fatalf("%v, want no 429 and at least 150 × 200", c.status)
				}
			})
		})
	}
}

// Against a real httplimit-protected test server, on the real clock: a
// paced client offering twice the allowed rate gets no 429. The margins are
// wide (the server allows bursts of 20, the pacer sends at 40/s against 50/s)
// so that scheduling delays cannot make a test fail.
func TestPacerRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("uses the real clock for half a second")
	}
	srv := httptest.NewServer(limited(t, sluice.PerSecond(50).WithBurst(20)))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	run := func(rt http.RoundTripper) *tally {
		return load(8, 500*time.Millisecond, func(ctx context.Context, c *tally) {
			tick := time.NewTicker(80 * time.Millisecond) // 8 × 12.5/s = 100/s
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				resp, err := getWith(ctx, rt, srv.URL)
				if gaveUp(ctx, err) {
					continue
				}
				c.add(resp, err)
			}
		})
	}

	c := run(&client.Pacer{Base: base, Limit: sluice.PerSecond(40).WithBurst(1)})
	if len(c.errs) > 0 || c.status[429] != 0 || c.status[200] < 5 {
		t.Fatalf("paced: %v, errors %v; want no 429 and some 200s", c.status, c.errs)
	}
	t.Logf("paced: %v", c.status)
}

// A wait that would end after the request's deadline is not taken: the
// request fails at once with ErrWaitTooLong and is not sent.
func TestPacerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := always(http.StatusOK)
		p := &client.Pacer{Base: srv, Limit: sluice.Every(10 * time.Second)}
		if _, err := p.RoundTrip(get(t, "http://api.test/")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := get(t, "http://api.test/").WithContext(ctx)
		t0 := time.Now()
		_, err := p.RoundTrip(req)
		if !errors.Is(err, client.ErrWaitTooLong) || time.Since(t0) != 0 || srv.count() != 1 {
			t.Fatalf("err %v after %v, %d sent; want ErrWaitTooLong at once, 1 sent", err, time.Since(t0), srv.count())
		}
		// Without a deadline it waits the 10 s.
		if _, err := p.RoundTrip(get(t, "http://api.test/")); err != nil || time.Since(t0) != 10*time.Second {
			t.Fatalf("err %v after %v; want nil after 10s", err, time.Since(t0))
		}
	})
}

// A 429 with Retry-After holds its key (the host) until then; other hosts go
// on. A Transport around the pacer waits the same time, once.
func TestPacerRetryAfterHoldsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int32
		srv := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == "a.test" && sent.Add(1) == 1 {
				return respond(http.StatusTooManyRequests, "Retry-After", "8"), nil
			}
			return respond(http.StatusOK), nil
		})
		p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}
		t0 := time.Now()
		resp := roundTrip(t, p, "http://a.test/")
		if resp.StatusCode != 429 {
			t.Fatalf("first: %d", resp.StatusCode)
		}
		if _, err := p.RoundTrip(get(t, "http://b.test/")); err != nil || time.Since(t0) != 0 {
			t.Fatalf("other host: %v after %v, want at once", err, time.Since(t0))
		}
		if _, err := p.RoundTrip(get(t, "http://a.test/")); err != nil || time.Since(t0) != 8*time.Second {
			t.Fatalf("same host: %v after %v, want after 8s", err, time.Since(t0))
		}

		// Transport over Pacer: the retry waits 8 s (no jitter), not 16.
		sent.Store(0)
		tr := &client.Transport{Base: &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}, Backoff: client.Backoff{Rand: zeroRand}}
		t0 = time.Now()
		resp, err := tr.RoundTrip(get(t, "http://a.test/"))
		if err != nil || resp.StatusCode != 200 || time.Since(t0) != 8*time.Second {
			t.Fatalf("Transport over Pacer: %v, %v after %v; want 200 after 8s", resp, err, time.Since(t0))
		}
	})
}

// gated is a fake server whose request with header Id x waits for the
// RateLimit value to answer with on gate x.
type gated struct {
	gates map[string]chan string
	sent  atomic.Int32
	mu    sync.Mutex
	at    map[string]time.Time // when each request was sent
}

func newGated(ids ...string) *gated {
	g := &gated{gates: map[string]chan string{}, at: map[string]time.Time{}}
	for _, id := range ids {
		g.gates[id] = make(chan string)
	}
	return g
}

func (g *gated) RoundTrip(r *http.Request) (*http.Response, error) {
	g.sent.Add(1)
	g.mu.Lock()
	g.at[r.Header.Get("Id")] = time.Now()
	g.mu.Unlock()
	rl := <-g.gates[r.Header.Get("Id")]
	return respond(http.StatusOK, "RateLimit", rl), nil
}

func (g *gated) sentAt(id string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.at[id]
}

// send starts a request with the given Id through p.
func send(wg *sync.WaitGroup, p http.RoundTripper, id string) {
	wg.Go(func() {
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
		req.Header.Set("Id", id)
		p.RoundTrip(req)
	})
}

// A report counts the requests sent after the one it answers: r=2 with two
// requests still in flight leaves nothing until t.
func TestPacerCountsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated("A", "B", "C", "D")
		p := &client.Pacer{Base: g, Limit: sluice.PerSecond(1000)}
		var wg sync.WaitGroup
		for _, id := range []string{"A", "B", "C"} {
			send(&wg, p, id)
			synctest.Wait()
		}
		g.gates["A"] <- `"q";r=2;t=5`
		synctest.Wait()
		t0 := time.Now()
		send(&wg, p, "D")
		synctest.Wait()
		if g.sent.Load() != 3 {
			t.Fatalf("D sent although r=2 and B and C are in flight")
		}
		g.gates["B"] <- `"q";r=1;t=5`
		g.gates["C"] <- `"q";r=0;t=5`
		time.Sleep(time.Minute)
		if g.sent.Load() != 4 || g.sentAt("D").Sub(t0) != 5*time.Second {
			t.Fatalf("D sent after %v (sent %d), want after 5s", g.sentAt("D").Sub(t0), g.sent.Load())
		}
		g.gates["D"] <- `"q";r=9;t=5`
		wg.Wait()
	})
}

// A report older than the one in force is ignored.
func TestPacerIgnoresStaleReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated("E", "F", "G")
		p := &client.Pacer{Base: g, Limit: sluice.PerSecond(1000)}
		var wg sync.WaitGroup
		send(&wg, p, "E")
		synctest.Wait()
		send(&wg, p, "F")
		synctest.Wait()
		g.gates["F"] <- `"q";r=0;t=5`
		synctest.Wait()
		g.gates["E"] <- `"q";r=9;t=5` // older than F's
		synctest.Wait()
		t0 := time.Now()
		send(&wg, p, "G")
		time.Sleep(time.Minute)
		if g.sent.Load() != 3 || g.sentAt("G").Sub(t0) != 5*time.Second {
			t.Fatalf("G sent after %v, want after 5s", g.sentAt("G").Sub(t0))
		}
		g.gates["G"] <- `"q";r=9;t=5`
		wg.Wait()
	})
}

func TestPacerKeyAndErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := always(http.StatusOK)
		var keys []string
		p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(5), Key: func(r *http.Request) string {
			keys = append(keys, r.Header.Get("Tenant"))
			return "tenant:" + r.Header.Get("Tenant")
		}}
		req := get(t, "http://api.test/")
		req.Header.Set("Tenant", "acme")
		if _, err := p.RoundTrip(req); err != nil || len(keys) != 1 || keys[0] != "acme" {
			t.Fatalf("custom key: %v, %v", err, keys)
		}

		bad := &client.Pacer{Base: srv, Limit: sluice.Limit{}}
		if _, err := bad.RoundTrip(get(t, "http://api.test/")); !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Fatalf("invalid limit: %v, want ErrInvalidLimit", err)
		}

		ctx, cancel := context.WithCancel(context.Background())
		slow := &client.Pacer{Base: srv, Limit: sluice.Every(time.Hour)}
		slow.RoundTrip(get(t, "http://api.test/"))
		time.AfterFunc(time.Second, cancel)
		req = get(t, "http://api.test/").WithContext(ctx)
		if _, err := slow.RoundTrip(req); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v, want context.Canceled", err)
		}
	})
}
