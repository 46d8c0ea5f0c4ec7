package failsafe_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
)

// BenchmarkDecide is one decision through a closed breaker, under a
// caller's deadline (as gRPC's, from Envoy's timeout), on a store that
// answers at once: "answers" reads nothing of its context, "afterfunc"
// watches it with context.AfterFunc for the call, as pgx does for every
// query, and "derived" derives a context of its own from it.
func BenchmarkDecide(b *testing.B) {
	ok := sluice.Result{Allowed: true}
	for _, c := range []struct {
		name string
		f    funcPrimary
	}{
		{"answers", func(context.Context) (sluice.Result, error) { return ok, nil }},
		{"afterfunc", func(ctx context.Context) (sluice.Result, error) {
			stop := context.AfterFunc(ctx, func() {})
			defer stop()
			return ok, nil
		}},
		{"derived", func(ctx context.Context) (sluice.Result, error) {
			_, cancel := context.WithCancel(ctx)
			defer cancel()
			return ok, nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			l, err := failsafe.New(failsafe.Config{Primary: c.f, Timeout: time.Second, Logger: slog.New(&logs{})})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := l.Decide(ctx, "k", lim, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
