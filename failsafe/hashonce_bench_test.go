package failsafe_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkDecideLocalPartitioned is one decision through a closed,
// partitioned breaker in Local mode, as sluice serve's local rules make
// it: the key picks its partition and its learned allowance is recorded.
func BenchmarkDecideLocalPartitioned(b *testing.B) {
	clock := clocktest.New()
	local := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer local.Close()
	l, err := failsafe.New(failsafe.Config{Primary: &primary{}, Mode: failsafe.Local, Local: local, Nodes: 2,
		Partitions: 16, Logger: slog.New(&logs{}), Clock: clock})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const key = "tenant-4711:route:/api/v1/orders"
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := l.Decide(ctx, key, lim, 1); err != nil {
			b.Fatal(err)
		}
	}
}
