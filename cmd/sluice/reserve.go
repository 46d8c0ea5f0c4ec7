package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// wrapRemote puts, from the store out, the reservations (-reserve-units,
// or -lease-share's leases: relief.Batcher, whose units left at shutdown
// are refunded before the store closes, relief.Batcher.ReleaseAndLog),
// the local share (-local-share: relief.Hybrid with a memory store) and
// the over-limit cache (-local-cache, cacheBytes its budget) in front of st. The local share's
// memory store is held to mem's budget (-memory-max-bytes).
func (r *remoteOptions) wrapRemote(st stores.Opened, localCache bool, cacheBytes int64, mem memstore.Config, log *slog.Logger) stores.Opened {
	lim, closeStore := st.Limiter, st.Close
	var res *relief.Batcher
	if r.reserveUnits > 0 || r.leaseShare > 0 {
		res = relief.NewBatcher(lim, relief.BatchConfig{Batch: r.reserveUnits, Hold: r.reserveHold, LeaseShare: r.leaseShare, Processes: r.leaseCount})
		lim = res
	}
	var local *memstore.Store
	if r.localShare > 0 || r.fleetCount != nil {
		local = stores.FailureLocal(mem) // held to -memory-max-bytes, as failure mode local's store
		lim = relief.NewHybrid(local, lim, r.shareOf())
	}
	if localCache {
		// Denials only, so it never admits over a limit (see package
		// relief); a refund or reset made through another process is seen
		// at most cacheMaxHold late.
		lim = relief.NewOverLimitCache(lim, overLimitCacheConfig(cacheBytes))
	}
	st.Limiter = lim
	if res != nil {
		// The units go back first, then what was to be released before
		// (the fleet's leave: startFleet), all within the shutdown's ctx.
		then := st.Release
		st.Release = func(ctx context.Context) {
			res.ReleaseAndLog(ctx, log)
			if then != nil {
				then(ctx)
			}
		}
	}
	st.Close = func() {
		if local != nil {
			local.Close()
		}
		closeStore()
	}
	return st
}

// overLimitCacheConfig is the over-limit cache's: its budget in bytes from
// LOCAL_CACHE_SIZE_IN_BYTES (0: relief's default, 32 MiB), its denials
// held at most cacheMaxHold.
func overLimitCacheConfig(bytes int64) relief.CacheConfig {
	return relief.CacheConfig{MaxBytes: bytes, MaxHold: cacheMaxHold}
}

// cacheMaxHold is how long serve's over-limit cache answers a denial before
// it asks the store again: a client that keeps sending to a key over its
// limit costs the store one decision a second per process, and a refund or
// an admin reset made through another process is seen within a second.
const cacheMaxHold = time.Second

// localShare returns -local-share's share of a limit: failsafe.Split's, the
// share -failure-nodes gives a process while the store fails.
func localShare(n int) func(sluice.Limit) sluice.Limit {
	return func(l sluice.Limit) sluice.Limit { return failsafe.Split(l, n) }
}
