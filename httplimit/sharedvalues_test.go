package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// A refusal's RateLimit, Retry-After and reason values are made once per
// policy and wait and shared between responses: each refusal still shows
// its own wait (below and above the longest wait kept, 300 s), and a
// header value one response appends to does not reach the next.
func TestSharedRefusalValuesFollowEachWait(t *testing.T) {
	for _, period := range []time.Duration{time.Minute, time.Hour} {
		clock := clocktest.At(time.Unix(1699999200, 0)) // on the hour: a fixed window starts there
		m := mustNew(t, httplimit.Config{
			Settings: httplimit.Settings{Limiter: newStore(t, clock)},
			Policies: []httplimit.Policy{{
				Name: "p", Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: period},
				Key: httplimit.Global(),
			}},
		})
		h := m.Handler(http.HandlerFunc(ok))
		req := func() http.Header {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			return w.Header() // the handler's map, values as set
		}
		req() // the one admitted
		secs := int(period / time.Second)
		for _, waited := range []int{0, 10, 0, 20} {
			clock.Advance(time.Duration(waited) * time.Second)
			secs -= waited
			got := req()
			want := map[string]string{
				"Retry-After":          strconv.Itoa(secs),
				"Ratelimit":            `"p";r=0;t=` + strconv.Itoa(secs),
				httplimit.ReasonHeader: "p",
				"Ratelimit-Policy":     `"p";q=1;w=` + strconv.Itoa(int(period/time.Second)),
				"Cache-Control":        "no-store",
			}
			for k, v := range want {
				if g := got.Values(k); !slices.Equal(g, []string{v}) {
					t.Errorf("period %v, %d s left: %s %q, want %q", period, secs, k, g, v)
				}
			}
			// A response that adds to the shared values (as a
			// handler or net/http may) leaves them as they were.
			got.Add("Retry-After", "x")
			got.Add("Ratelimit", "x")
			got.Add(httplimit.ReasonHeader, "x")
		}
	}
}
