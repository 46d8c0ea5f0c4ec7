package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

func Example() {
	store := memstore.New(memstore.Config{})
	defer store.Close()

	// Behind one load balancer at 10.0.0.0/8: trust its X-Forwarded-For,
	// nobody else's.
	ips := &clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	limit, err := httplimit.Wrap(httplimit.Config{
		Settings: httplimit.Settings{Limiter: store},
		Policies: []httplimit.Policy{
			{Name: "per-ip", Limit: sluice.PerMinute(2), Key: httplimit.ClientIP(ips)},
			{Name: "per-key", Limit: sluice.PerMinute(1000), Key: httplimit.Header("X-Api-Key"), OnMissingKey: httplimit.SkipMissing},
		},
	})
	if err != nil {
		panic(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") }))

	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.2:5000"
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(strings.TrimSpace(fmt.Sprint(w.Code, " ", w.Header().Get("RateLimit"), " ", w.Header().Get(httplimit.ReasonHeader))))
	}
	// Output:
	// 200 "per-ip";r=1;t=30
	// 200 "per-ip";r=0;t=60
	// 429 "per-ip";r=0;t=30 per-ip
}
