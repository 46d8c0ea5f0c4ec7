package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// The proxy on Redis, single node and Cluster: NGINX's case 57 (burst=5
// nodelay: six pass, the seventh is refused) with the queue's meter in
// Redis, and two proxies sharing it admit six in all.
func TestProxyOnRedis(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"single", func(t *testing.T) string { return "redis://" + redistest.Single(t).Addr }},
		{"cluster", func(t *testing.T) string { return "redis+cluster://" + redistest.SharedCluster(t).Addrs[0] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := redisstore.New(context.Background(), redisstore.Config{URL: tc.url(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			up := newUpstream(t)
			// Unique per run: the shared servers outlive a -count=N run.
			key := strings.ReplaceAll(t.Name(), "/", "_") + strconv.FormatInt(time.Now().UnixNano(), 36)
			yaml := `
status: 503
limits: [{name: ` + key + `, key: global, rate: 1r/m, burst: 5, nodelay: true}]
routes: [{name: all, match: /, limits: [` + key + `]}]
`
			var fronts []*httptest.Server
			for range 2 {
				cfg := parsed(t, yaml, up)
				cfg.Limiter = rs
				_, srv := front(t, cfg)
				fronts = append(fronts, srv)
			}
			var mu sync.Mutex
			codes := map[int]int{}
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					c := get(t, fronts[i%2].Client(), fronts[i%2].URL+"/").StatusCode
					mu.Lock()
					codes[c]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if codes[http.StatusOK] != 6 || codes[http.StatusServiceUnavailable] != 14 || up.hits.Load() != 6 {
				t.Fatalf("codes %v, upstream %d; want 6 admitted, 14 refused", codes, up.hits.Load())
			}
		})
	}
}
