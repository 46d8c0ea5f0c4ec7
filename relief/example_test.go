package relief_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

func ExampleOverLimitCache() {
	remote := memstore.New(memstore.Config{}) // stands in for a redisstore.Store
	defer remote.Close()
	cache := relief.NewOverLimitCache(remote, relief.CacheConfig{})

	// A client that ignores 429s: after the first denial, the rest are
	// answered from memory until the retry-after.
	denied := 0
	for range 1000 {
		r, err := cache.Allow(context.Background(), "greedy", sluice.PerMinute(10))
		if err != nil {
			panic(err)
		}
		if !r.Allowed {
			denied++
		}
	}
	fmt.Println("denied", denied)
	// Output: denied 990
}
