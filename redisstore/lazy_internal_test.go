package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// RLQS's store on a Lazy store that has not connected fails as the
// store's decisions do: ErrUnavailable, with the last connection error, so
// that RLQS's warning says why.
func TestLazyRLQSNotConnectedSaysWhy(t *testing.T) {
	refused := errors.New("connection refused")
	for _, tt := range []struct {
		name    string
		lastErr error
		want    error
	}{{"before an attempt", nil, sluice.ErrUnavailable}, {"after a failed attempt", refused, refused}} {
		l := &Lazy{}
		if tt.lastErr != nil {
			l.lastErr.Store(unavailable(tt.lastErr))
		}
		r := l.RLQS()
		_, derr := r.Demands(t.Context(), "b", time.Time{})
		for _, err := range []error{r.Report(t.Context(), "b", "c", "", 1, time.Time{}, time.Second), derr, r.Forget(t.Context(), "b", "c", "")} {
			if !errors.Is(err, tt.want) || !errors.Is(err, sluice.ErrUnavailable) || !errors.Is(err, ErrNotConnected) {
				t.Errorf("%s: %v, want an error wrapping %v, ErrUnavailable and ErrNotConnected", tt.name, err, tt.want)
			}
		}
	}
}
