package httplimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// BenchmarkServeSettle measures a request through the middleware with one
// token bucket policy, plain and settled from the Sluice-Cost header the
// handler sets (a charge each time), and a policy that counts 401s and has
// a penalty box: the overhead of looking at the response.
func BenchmarkServeSettle(b *testing.B) {
	lim := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}
	failed, _ := httplimit.ParseStatusSet("401")
	costs := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Sluice-Cost"] = []string{"7"}
	})
	for _, bc := range []struct {
		name string
		pol  httplimit.Policy
	}{
		{"plain", httplimit.Policy{Name: "p", Key: httplimit.Host(), Limit: lim}},
		{"settle", httplimit.Policy{Name: "p", Key: httplimit.Host(), Limit: lim, Settle: &httplimit.Settle{}}},
		{"count-401-penalty", httplimit.Policy{Name: "p", Key: httplimit.Host(), Limit: lim, CountOnly: failed, Penalty: time.Minute}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			clock := clocktest.New() // a second per request: the key never runs dry
			h, r := measured(b, httplimit.Config{Settings: httplimit.Settings{Limiter: newStore(b, clock)}, Policies: []httplimit.Policy{bc.pol}}, costs)
			w := &statusWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(time.Second)
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		})
	}
}
