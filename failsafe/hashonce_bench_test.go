package failsafe_test

import (
	"context"
	"testing"
)

// BenchmarkDecideLocalPartitioned is one decision through a closed,
// partitioned breaker in Local mode, as sluice serve's local rules make
// it: the key picks its partition and its learned allowance is recorded.
func BenchmarkDecideLocalPartitioned(b *testing.B) {
	l := localPartitioned(b)
	ctx := context.Background()
	const key = "tenant-4711:route:/api/v1/orders"
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := l.Decide(ctx, key, lim, 1); err != nil {
			b.Fatal(err)
		}
	}
}
