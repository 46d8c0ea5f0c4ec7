package stores

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// While Redis is down, the store that failure mode local decides on holds
// no more than the memory store's budget given to Open (serve's
// -memory-max-bytes; the proxy's memory_max_bytes and memory_max_keys): a flood of distinct keys evicts, it does not grow the
// heap. Before, that store was made with memstore's defaults (256 MiB,
// 1,000,000 keys) whatever the budget.
func TestOpenLocalFailureStoreHoldsTheMemoryBudget(t *testing.T) {
	const maxBytes, maxKeys = 256 << 10, 512 // keys: a multiple of the 64 shards, each holding MaxKeys/64
	st, err := Open(t.Context(), "redis://127.0.0.1:1", nil, "local",
		memstore.Config{MaxBytes: maxBytes, MaxKeys: maxKeys}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	local, ok := st.Failure.Local.(*memstore.Store)
	if !ok {
		t.Fatalf("Failure.Local is %T, want *memstore.Store", st.Failure.Local)
	}
	lim := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 10, Period: time.Minute, Burst: 10}
	for i := range 20_000 {
		if _, err := local.Allow(context.Background(), fmt.Sprintf("flood:%08d", i), lim); err != nil {
			t.Fatal(err)
		}
	}
	s := local.Stats()
	if s.MaxBytes != maxBytes || s.MaxKeys != maxKeys {
		t.Errorf("local store's bounds %d bytes, %d keys; want %d, %d", s.MaxBytes, s.MaxKeys, maxBytes, maxKeys)
	}
	if s.Bytes > maxBytes || s.Keys > maxKeys {
		t.Errorf("after 20,000 distinct keys the local store holds %d keys in %d bytes; want at most %d keys in %d bytes", s.Keys, s.Bytes, maxKeys, maxBytes)
	}
	if s.Evictions == 0 {
		t.Errorf("no key evicted after 20,000 distinct keys: %+v", s)
	}
}
