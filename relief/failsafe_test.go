package relief_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/relief"
)

// callerKey is the key of the caller's name in the contexts of the test
// below, as a tracing span would be.
type callerKey struct{}

// seesLate is a store whose reservations of key "late" answer only when
// answer is closed, whatever their context, and then report the value
// their context carries for callerKey; other keys are admitted at once.
type seesLate struct {
	reached chan struct{}
	answer  chan struct{}
	seen    chan any
}

func (s *seesLate) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if key == "late" {
		close(s.reached)
		<-s.answer
		s.seen <- ctx.Value(callerKey{})
	}
	return sluice.Result{Allowed: true, Remaining: lim.Capacity() - cost}, nil
}

// A Batcher behind the failure policy whose request gives up while its
// reservation is with the store goes on with that reservation after
// AllowN returned, on a context derived from the call's: the failure
// policy never lends that ended context to a later call, so the late
// reservation still carries its own request's values (its trace), not
// those of the decisions made meanwhile.
func TestBatcherLateReservationBehindFailsafeKeepsItsRequestsValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &seesLate{reached: make(chan struct{}), answer: make(chan struct{}), seen: make(chan any, 1)}
		fs, err := failsafe.New(failsafe.Config{Primary: relief.NewBatcher(store, relief.BatchConfig{Batch: 5}),
			Timeout: time.Second, Logger: slog.New(slog.NewTextHandler(&testlog.Buffer{}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		lim := sluice.PerSecond(100)
		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), callerKey{}, "first"))
		gaveUp := make(chan error, 1)
		go func() {
			_, _, err := fs.Decide(ctx, "late", lim, 1)
			gaveUp <- err
		}()
		<-store.reached
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("the request that gave up: %v, want context.Canceled", err)
		}
		later := context.WithValue(t.Context(), callerKey{}, "later")
		for range 20 {
			if _, _, err := fs.Decide(later, "other", lim, 1); err != nil {
				t.Fatal(err)
			}
		}
		close(store.answer)
		if got := <-store.seen; got != "first" {
			t.Errorf("the late reservation's context carries %v, want its own request's value, first", got)
		}
	})
}
