package httplimit_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// Two requests that break the policy at once put the key in the penalty
// box once: the box lasts the penalty, not the penalty once per breach
// (each charging the box into debt, as a sluice.Charger allows, doubled
// it). Here two settlements, each charged past the allowance while the
// other was upstream.
func TestConcurrentBreachesBoxForThePenaltyOnce(t *testing.T) {
	clock := clocktest.At(minute0)
	var both sync.WaitGroup
	both.Add(2)
	h := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clock)},
		Policies: []httplimit.Policy{{
			Name: "tokens", Key: httplimit.Header("X-User"),
			Limit:  sluice.PerMinute(10),
			Settle: &httplimit.Settle{}, Penalty: 10 * time.Minute,
		}},
	}).Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		both.Done()
		both.Wait() // both requests are admitted before either settles
		w.Header().Set("Sluice-Cost", "30")
	}))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if w := call(h, ""); w.Code != 200 {
				t.Errorf("admitted on the estimate: %d, want 200", w.Code)
			}
		})
	}
	wg.Wait()
	if w := call(h, ""); w.Code != 429 || w.Header().Get("Retry-After") != "600" {
		t.Fatalf("after two breaches at once: %d, Retry-After %q; want 429, 600 (the penalty once)", w.Code, w.Header().Get("Retry-After"))
	}
}
