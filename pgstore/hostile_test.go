package pgstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/pgstore"
)

// The ledger's hostile tests: keys whose values a client chooses (as
// sluice serve spells a descriptor value into its key), keys of the
// greatest size, and many periods.

// openCfg opens a store with cfg on a fresh schema of the shared server.
func openCfg(t *testing.T, cfg pgstore.Config) *pgstore.Store {
	t.Helper()
	url := pgtest.Schema(t) // may start the shared server: not within Open's deadline
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hostileKey is a client-chosen descriptor value of n bytes, different
// on every call, as a store key of the group "api_tenant".
func hostileKey(t *testing.T, n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return "api_tenant_" + hex.EncodeToString(b)[:n-len("api_tenant_")]
}

// rows returns the ledger's rows and the bytes of their keys.
func rows(t *testing.T, s *pgstore.Store) (n, keyBytes int64) {
	t.Helper()
	err := s.Pool().QueryRow(context.Background(), "SELECT count(*), coalesce(sum(octet_length(key)), 0) FROM sluice_usage").Scan(&n, &keyBytes)
	if err != nil {
		t.Fatal(err)
	}
	return n, keyBytes
}

// TestHostileValuesAreCappedPerGroup: 120 distinct 4 KB descriptor values
// in one period write the rows of at most MaxKeysPerGroup (50) of them: the
// others are refused with ErrTooManyKeys, a bad input (not a store
// failure), with a message naming the group, and are counted and logged
// once. Keys already counted go on being served, another group's keys are
// not refused, and the next period has room again.
func TestHostileValuesAreCappedPerGroup(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := clocktest.At(start.Add(time.Minute))
	var logged bytes.Buffer
	s := openCfg(t, pgstore.Config{Clock: clock, MaxKeysPerGroup: 50, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	ctx := context.Background()
	var admitted []string
	refused := 0
	for range 120 {
		key := hostileKey(t, sluice.MaxKeyLen)
		r, err := s.Allow(ctx, key, hour)
		switch {
		case err == nil && r.Allowed:
			admitted = append(admitted, key)
		case errors.Is(err, pgstore.ErrTooManyKeys) && errors.Is(err, sluice.ErrBadInput):
			if refused == 0 && (!strings.Contains(err.Error(), `"api_tenant"`) || !strings.Contains(err.Error(), "50 keys")) {
				t.Errorf("the refusal says %q; want the group and the bound named", err)
			}
			refused++
		default:
			t.Fatalf("Allow(a new 4 KB value) = %+v, %v; want admitted or ErrTooManyKeys", r, err)
		}
	}
	n, keyBytes := rows(t, s)
	t.Logf("admitted %d, refused %d; %d rows, %d bytes of keys", len(admitted), refused, n, keyBytes)
	if len(admitted) != 50 || refused != 70 || n != 50 || keyBytes > 50*sluice.MaxKeyLen {
		t.Errorf("120 distinct values: admitted %d, refused %d, %d rows of %d key bytes; want 50, 70, 50 rows of at most %d", len(admitted), refused, n, keyBytes, 50*sluice.MaxKeyLen)
	}
	if got := s.KeysRefused(); got != 70 {
		t.Errorf("KeysRefused = %d, want 70", got)
	}
	if lines := strings.Count(logged.String(), "keys refused"); lines != 1 || !strings.Contains(logged.String(), "max_keys=50") {
		t.Errorf("the log has %d lines about refused keys, want 1 naming max_keys=50:\n%s", lines, logged.String())
	}
	if r, err := s.Allow(ctx, admitted[0], hour); err != nil || !r.Allowed || r.Remaining != 8 {
		t.Errorf("a key counted before the cap = %+v, %v; want admitted, 8 left", r, err)
	}
	if r, err := s.Allow(ctx, "api_user_1", hour); err != nil || !r.Allowed {
		t.Errorf("a key of another group = %+v, %v; want admitted", r, err)
	}
	clock.Advance(time.Hour)
	if r, err := s.Allow(ctx, hostileKey(t, 64), hour); err != nil || !r.Allowed {
		t.Errorf("a new value in the next period = %+v, %v; want admitted", r, err)
	}
}

// TestHostileConcurrentNewKeysStayUnderTheCap: 16 goroutines sending new
// values at once never get more keys counted in the group than the cap,
// and every key the ledger holds was answered admitted.
func TestHostileConcurrentNewKeysStayUnderTheCap(t *testing.T) {
	s := openCfg(t, pgstore.Config{Clock: clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)), MaxKeysPerGroup: 40})
	admitted, refused := newKeysAtOnce(t, []*pgstore.Store{s}, 16, 10, 100)
	n, _ := rows(t, s)
	t.Logf("admitted %d, refused %d, rows %d", admitted, refused, n)
	if n != admitted || n > 40 || n < 30 {
		t.Errorf("%d rows for %d admissions under a cap of 40; want as many rows as admissions, at most 40 (and most of them used)", n, admitted)
	}
}

// newKeysAtOnce runs workers goroutines at once, worker w deciding, one
// after another, each new keys of keyLen bytes (hostileKey) on
// stores[w%len(stores)],
// and returns how many were admitted and how many refused for the key cap
// (ErrTooManyKeys); any other answer fails t.
func newKeysAtOnce(t *testing.T, stores []*pgstore.Store, workers, each, keyLen int) (admitted, refused int64) {
	t.Helper()
	var a, r atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				res, err := stores[w%len(stores)].Allow(context.Background(), hostileKey(t, keyLen), hour)
				switch {
				case err == nil && res.Allowed:
					a.Add(1)
				case errors.Is(err, pgstore.ErrTooManyKeys):
					r.Add(1)
				default:
					t.Errorf("Allow = %+v, %v", res, err)
				}
			}
		})
	}
	wg.Wait()
	return a.Load(), r.Load()
}

// TestHostileManyPeriodsArePruned: a key used in 300 hourly periods, and
// 12,000 rows of periods long gone (more than one batch), are deleted by
// Prune up to the instant it is given, the periods that had not ended by
// then kept, with their group rows; a Prune of periods that have not ended
// yet is refused and deletes nothing.
func TestHostileManyPeriodsArePruned(t *testing.T) {
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktest.At(start)
	s := openCfg(t, pgstore.Config{Clock: clock})
	ctx := context.Background()
	for range 300 {
		if r, err := s.Allow(ctx, "api_tenant_acme", hour); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
		clock.Advance(time.Hour)
	}
	_, err := s.Pool().Exec(ctx, `INSERT INTO sluice_usage (key_hash, period_start, period_end, key, count, quota)
SELECT sha256(convert_to('old' || i, 'UTF8')), '2019-01-01'::timestamptz, '2019-02-01'::timestamptz, convert_to('old' || i, 'UTF8'), 1, 1
FROM generate_series(1, 12000) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Prune(ctx, s.Pool(), time.Now().Add(time.Hour)); err == nil {
		t.Error("Prune of periods not ended yet: no error")
	}
	if n, _ := rows(t, s); n != 12300 {
		t.Fatalf("%d rows after a refused Prune, want 12,300", n)
	}
	cut := start.Add(100 * time.Hour)
	p, err := pgstore.Prune(ctx, s.Pool(), cut)
	if err != nil || p.Usage != 12100 || p.Groups != 100 {
		t.Fatalf("Prune(100 hours in) = %+v, %v; want 12,100 usage rows and 100 group rows", p, err)
	}
	u, err := s.Usage(ctx, "api_tenant_acme")
	if err != nil || len(u) != 200 || !u[0].Start.Equal(cut) {
		t.Fatalf("Usage after Prune: %d periods from %v, %v; want 200 from %v", len(u), u[0].Start, err, cut)
	}
	if p, err := pgstore.Prune(ctx, s.Pool(), cut); err != nil || p != (pgstore.Pruned{}) {
		t.Errorf("Prune again = %+v, %v; want nothing deleted", p, err)
	}
}

// TestHostileValuesOfLimitsNotBillableLeaveNoRowsOnceTheirPeriodEnds: 200
// distinct 4 KB descriptor values on a limit that is not billable write
// their rows while their period counts, and the background sweep deletes
// every one of them once the period has ended (SweepGrace later), leaving
// the billable limit's periods (the ledger) and the current period alone.
// Before, every such row stayed until an operator pruned by age.
func TestHostileValuesOfLimitsNotBillableLeaveNoRowsOnceTheirPeriodEnds(t *testing.T) {
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktest.At(start)
	s := openCfg(t, pgstore.Config{Clock: clock, SweepEvery: 10 * time.Millisecond})
	ctx := context.Background()
	billable := hour
	billable.Billable = true
	for i := range 200 {
		if r, err := s.Allow(ctx, hostileKey(t, 4096), hour); err != nil || !r.Allowed {
			t.Fatalf("value %d: Allow = %+v, %v", i, r, err)
		}
	}
	for _, k := range []string{"billing_tenant_a", "billing_tenant_b"} {
		if r, err := s.Allow(ctx, k, billable); err != nil || !r.Allowed {
			t.Fatalf("%s: Allow = %+v, %v", k, r, err)
		}
	}
	if n, err := pgstore.Sweep(ctx, s.Pool(), clock.Now()); err != nil || n != 0 {
		t.Fatalf("Sweep within the period = %d, %v; want nothing deleted", n, err)
	}
	if n, _ := rows(t, s); n != 202 {
		t.Fatalf("%d rows while the period counts, want 202", n)
	}
	clock.Advance(time.Hour + pgstore.SweepGrace)
	if r, err := s.Allow(ctx, "api_tenant_now", hour); err != nil || !r.Allowed {
		t.Fatalf("Allow in the next period = %+v, %v", r, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.Swept() < 200 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // waiting on the sweep's goroutine, not passing time
	}
	if got := s.Swept(); got != 200 {
		t.Fatalf("the background sweep deleted %d rows, want the 200 ended periods of the limit that is not billable", got)
	}
	if n, keyBytes := rows(t, s); n != 3 || keyBytes > 100 {
		t.Errorf("%d rows (%d key bytes) after the sweep, want 3: the two billable periods and the current one", n, keyBytes)
	}
	for _, k := range []string{"billing_tenant_a", "billing_tenant_b"} {
		if u, err := s.Usage(ctx, k); err != nil || len(u) != 1 || u[0].Count != 1 {
			t.Errorf("Usage(%s) after the sweep = %+v, %v; want its billable period kept", k, u, err)
		}
	}
	// The groups' key counts of ended periods go too (groups a client's
	// values can name, with nested descriptors): the current period's stays.
	var groups int64
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM sluice_usage_groups").Scan(&groups); err != nil {
		t.Fatal(err)
	}
	if groups != 1 {
		t.Errorf("%d rows of groups' key counts after the sweep, want 1: the current period's", groups)
	}
}
