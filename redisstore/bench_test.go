package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkAllowN is one admitted decision of cost 1 on Redis's clock, per
// algorithm, from 16 goroutines per CPU spread over 1,000 keys, so that
// rueidis pipelines them and ns/op is mostly the server's time per script;
// allocs/op is what the store and rueidis allocate around each round trip.
func BenchmarkAllowN(b *testing.B) {
	s := open(b, singleURL(b), nil)
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		b.Run("alg="+a.String(), func(b *testing.B) {
			lim := sluice.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Hour, Burst: 1_000_000}
			prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = prefix + strconv.Itoa(i)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Allow(ctx, keys[next.Add(1)%int64(len(keys))], lim); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
