package failsafe_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
)

// TestValidateLimitForwards: a failsafe Limiter refuses, at configuration
// time, the limits its primary cannot serve, in every mode, and in Local
// mode those its local limiter cannot serve; it refuses invalid limits
// itself.
func TestValidateLimitForwards(t *testing.T) {
	mem := memstore.New(memstore.Config{SweepInterval: -1})
	defer mem.Close()
	for _, mode := range everyMode {
		l, err := failsafe.New(failsafe.Config{Primary: storetest.PickyAbout(mem), Mode: mode, Local: mem})
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckValidateForwards(t, mode.String(), l)
	}
	l, err := failsafe.New(failsafe.Config{Primary: mem, Mode: failsafe.Local, Local: storetest.PickyAbout(mem)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ValidateLimit(storetest.OddLimit); !errors.Is(err, storetest.ErrPicky) {
		t.Errorf("local mode: ValidateLimit(%v) = %v, want the local limiter's refusal", storetest.OddLimit, err)
	}
	if _, err := l.AllowN(context.Background(), "k", sluice.PerSecond(10), 1); err != nil {
		t.Fatal(err)
	}
}
