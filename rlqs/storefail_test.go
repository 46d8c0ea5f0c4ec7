package rlqs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice/internal/rlqstest"
	"github.com/sluicehq/sluice/rlqs"
)

// failing is a MemoryStore that fails while down is set.
type failing struct {
	rlqs.MemoryStore
	down atomic.Bool
}

var errDown = errors.New("store down")

func (f *failing) Report(ctx context.Context, bucket, client, writer string, demand float64, now time.Time, ttl time.Duration) error {
	if f.down.Load() {
		return errDown
	}
	return f.MemoryStore.Report(ctx, bucket, client, writer, demand, now, ttl)
}

// While the store fails, a new bucket gets no assignment (the Envoy keeps
// its no_assignment_behavior) and an assigned one keeps its strategy;
// once the store is back, the next report assigns.
func TestAFailingStoreLeavesBucketsAsTheyAre(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &failing{}
		st.down.Store(true)
		s := newServer(t, st)
		deny := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
		c := rlqstest.New(rlqstest.Settings{Domain: "edge", NoAssignment: deny}, func() (rlqstest.Conn, error) {
			return rlqstest.Pipe(t.Context(), nil, s.StreamRateLimitQuotas), nil
		})
		defer c.Close()
		c.Request(apiBucket)
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if got, _ := c.Strategy(apiBucket); got != nil || c.Request(apiBucket) {
			t.Fatalf("with the store down: assignment %v and a request admitted; want none, and no_assignment_behavior (deny)", got)
		}
		st.down.Store(false)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got, _ := c.Strategy(apiBucket); got.GetTokenBucket() == nil {
			t.Fatalf("with the store back: %v, want a token bucket", got)
		}
		st.down.Store(true)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got, exp := c.Strategy(apiBucket); got.GetTokenBucket() == nil || !exp.After(time.Now()) {
			t.Errorf("the store down again: %v until %v, want the token bucket kept and extended", got, exp)
		}
		shutdown(t, s)
	})
}
