package main

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/memstore"
)

// -local-share's memory store is held to -memory-max-bytes, as failure
// mode local's is: before, it had memstore's default 256 MiB whatever
// the flag said, so a flood of distinct keys grew the heap by about a
// 75 bytes each (200,000 keys: about 15 MB against a 256 KiB budget).
func TestLocalShareStoreHoldsMemoryMaxBytes(t *testing.T) {
	const budget = 256 << 10
	remote := memstore.New(memstore.Config{MaxBytes: budget})
	defer remote.Close()
	r := remoteOptions{localShare: 2}
	st := r.wrapRemote(stores.Opened{Limiter: remote, Close: func() {}}, false, 0, memstore.Config{MaxBytes: budget}, slog.New(slog.DiscardHandler))
	defer st.Close()
	lim := sluice.Limit{Rate: 100, Period: time.Hour, Algorithm: sluice.FixedWindow}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range 200_000 {
		if _, err := st.Limiter.AllowN(context.Background(), "flood:"+strconv.Itoa(i), lim, 1); err != nil {
			t.Fatal(err)
		}
	}
	grew := int64(heap()) - int64(before)
	if grew > 4<<20 {
		t.Errorf("200,000 distinct keys grew the heap by %d bytes with -memory-max-bytes %d on the remote and the local share", grew, budget)
	}
}
