package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/pgstore"
)

// TestUncappedKeysNameNoGroup: with the cap off (MaxKeysPerGroup
// negative), a decision neither asks Config.Group for the key's group nor
// writes one on its row: key_group is NULL, as migration 0003 says of a
// writer that caps nothing.
func TestUncappedKeysNameNoGroup(t *testing.T) {
	var asked atomic.Int64
	s := openCfg(t, pgstore.Config{
		Clock:           clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)),
		MaxKeysPerGroup: -1,
		Group:           func(key string) string { asked.Add(1); return pgstore.DefaultGroup(key) },
	})
	ctx := context.Background()
	for _, key := range []string{"api_tenant_a", "api_tenant_a", "api_tenant_b"} {
		if r, err := s.Allow(ctx, key, hour); err != nil || !r.Allowed {
			t.Fatalf("Allow(%s) = %+v, %v", key, r, err)
		}
	}
	var named int64
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM sluice_usage WHERE key_group IS NOT NULL").Scan(&named); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 0 || named != 0 {
		t.Errorf("cap off: Config.Group asked %d times, %d rows name a group; want 0 and 0", n, named)
	}
}
