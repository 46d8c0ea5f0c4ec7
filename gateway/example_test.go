package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/memstore"
)

// A proxy file limits one route to 2 requests per minute per client IP;
// the gateway forwards what its limits admit to the upstream and answers
// the rest 429 with the RateLimit headers. Everything runs on loopback.
func Example() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.URL.Path)
	}))
	defer upstream.Close()

	f, err := gateway.ParseFile("proxy.yaml", []byte(`
upstream: `+upstream.URL+`
limits:
  - {name: per_ip, key: ip, rate: 2r/m, algorithm: fixed_window}
routes:
  - {name: api, match: /api/, limits: [per_ip]}
`))
	if err != nil {
		panic(err)
	}
	// A clock that stands still keeps the example's one-minute window from
	// ending mid-way; a real program leaves Clock nil (the system's).
	store := memstore.New(memstore.Config{Clock: stillClock{}})
	defer store.Close()
	f.Config.Limiter = store
	f.Config.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := gateway.New(f.Config)
	if err != nil {
		panic(err)
	}
	defer g.Close()

	for _, path := range []string{"/api/a", "/api/b", "/api/c", "/other"} {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", path, nil)) // from 192.0.2.1
		fmt.Println(path, w.Code, w.Body.String(), w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// /api/a 200 hello from /api/a "per_ip";q=2;w=60
	// /api/b 200 hello from /api/b "per_ip";q=2;w=60
	// /api/c 429 {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["per_ip"]} "per_ip";q=2;w=60
	// /other 200 hello from /other
}

// stillClock is a sluice.Clock that always tells the same time.
type stillClock struct{}

func (stillClock) Now() time.Time { return time.Unix(1700000000, 0) }
