package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// neverTick is a lease renewal ticker that never fires: a holder that has
// stopped renewing, as a killed proxy has.
func neverTick(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }

// Two proxies whose conns count in flight on one Redis (Config.InFlight)
// admit exactly max requests of a key together; the slot of a holder that
// stopped renewing comes back once its lease's TTL has passed.
func TestConnsSharedOnRedis(t *testing.T) {
	url := "redis://" + redistest.Single(t).Addr
	const ttl = 300 * time.Millisecond // real: Redis's clock
	up := newUpstream(t)
	entered, release := up.hold("/slow")
	defer close(release)
	name := "conn" + strconv.FormatInt(time.Now().UnixNano(), 36) // the shared server outlives a -count=N run
	yaml := "conn_status: 503\nconns: [{name: " + name + ", key: global, max: 2}]\nroutes: [{name: all, match: /, conns: [" + name + "]}]\n"
	var clients []*http.Client
	var urls []string
	for range 2 {
		rs, err := redisstore.New(context.Background(), redisstore.Config{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		leases, err := redisstore.NewLeases(rs, redisstore.LeasesConfig{TTL: ttl, Tick: neverTick})
		if err != nil {
			t.Fatal(err)
		}
		cfg := parsed(t, yaml, up)
		cfg.InFlight = leases
		_, srv := front(t, cfg)
		clients, urls = append(clients, srv.Client()), append(urls, srv.URL)
	}
	held := time.Now() // the leases are taken after this
	for i := range 2 {
		go func() { // held at the upstream until the test ends
			if res, err := clients[i].Get(urls[i] + "/slow"); err == nil {
				res.Body.Close()
			}
		}()
		<-entered
	}
	for i := range 2 {
		res := get(t, clients[i], urls[i]+"/")
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get(httplimit.ReasonHeader) != name {
			t.Fatalf("third request, on proxy %d: %d by %q; want 503 by %s", i, res.StatusCode, res.Header.Get(httplimit.ReasonHeader), name)
		}
	}
	// Both holders stop renewing (as killed proxies would): within a
	// deadline, and no sooner than the TTL, their slots are free again.
	start := time.Now()
	for i := range 2 {
		for {
			res := get(t, clients[i], urls[i]+"/")
			if res.StatusCode == http.StatusOK {
				if waited := time.Since(held); waited < ttl {
					t.Fatalf("proxy %d admitted %v after the slots were taken, before the TTL %v", i, waited, ttl)
				}
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("10s after the holders stopped renewing, proxy %d still refuses: %d", i, res.StatusCode)
			}
			time.Sleep(20 * time.Millisecond) // polling a real Redis's clock
		}
	}
	if got := up.hits.Load(); got != 4 {
		t.Fatalf("upstream saw %d requests; want 4 (2 held, 1 after the TTL on each proxy)", got)
	}
}
