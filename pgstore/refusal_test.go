package pgstore_test

import (
	"context"
	"crypto/sha256"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

// statements counts the round trips (queries, prepares and batches) a pgx
// connection makes: a pgx.QueryTracer, pgx.PrepareTracer and
// pgx.BatchTracer.
type statements struct{ n atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// TraceBatchStart counts a batch as one: its statements go in one round
// trip.
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// tracedPool returns a pool of one connection to a fresh schema and the
// count of the statements it sends.
func tracedPool(t *testing.T) (*pgxpool.Pool, *statements) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	sent := &statements{}
	cfg.ConnConfig.Tracer = sent
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, sent
}

// TestRefusalIsOneRoundTrip: a refused decision, the path a client past its
// quota drives, costs the database one statement, as an admission does, and
// still reports what is left and when to retry.
func TestRefusalIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	pool, sent := tracedPool(t)
	clock := clocktest.At(time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC))
	s, err := pgstore.New(ctx, pool, pgstore.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	// An admission and two refusals first, so that the connection has
	// prepared what each needs (the second refusal, of a key known to
	// have its row, is sent as the admission of a new key is not: see
	// TestNewKeyAfterKnownKeysIsTwoRoundTrips).
	if r, err := s.AllowN(ctx, "k", hour, 10); err != nil || !r.Allowed {
		t.Fatalf("spending the quota: %+v, %v", r, err)
	}
	for range 2 {
		if _, err := s.Allow(ctx, "k", hour); err != nil {
			t.Fatal(err)
		}
	}
	const refusals = 10
	sent.n.Store(0)
	want := sluice.Result{RetryAfter: 45 * time.Minute, ResetAfter: 45 * time.Minute}
	for range refusals {
		if r, err := s.Allow(ctx, "k", hour); err != nil || r != want {
			t.Fatalf("Allow past the quota = %+v, %v; want %+v", r, err, want)
		}
	}
	if n := sent.n.Load(); n != refusals {
		t.Errorf("%d refusals sent %d statements, want %d: one round trip each", refusals, n, refusals)
	}
	sent.n.Store(0)
	// A new key of a group of its own (other than k's).
	if r, err := s.Allow(ctx, "other_1", hour); err != nil || !r.Allowed || r.Remaining != 9 {
		t.Fatalf("Allow of another key = %+v, %v; want admitted, 9 left", r, err)
	}
	if n := sent.n.Load(); n != 1 {
		t.Errorf("an admission sent %d statements, want 1", n)
	}
}

// TestRefusalReportsTheCountOfAConcurrentDecision: a decision that waits on
// a period's row another transaction is writing (inserting it, or adding to
// it) and is refused once that commits reports the committed count, the
// one it was refused on, not the count from before it started waiting.
func TestRefusalReportsTheCountOfAConcurrentDecision(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	h := sha256.Sum256([]byte("k"))
	for _, tc := range []struct {
		name, before, during string
	}{
		{"inserted", "", `INSERT INTO sluice_usage (key_hash, period_start, period_end, key, count, quota) VALUES ($1, $2, $3, 'k', 8, 10)`},
		{"updated", `INSERT INTO sluice_usage (key_hash, period_start, period_end, key, count, quota) VALUES ($1, $2, $3, 'k', 3, 10)`,
			`UPDATE sluice_usage SET count = 8 WHERE key_hash = $1 AND period_start = $2 AND period_end = $3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, url := open(t, clocktest.At(start.Add(15*time.Minute)))
			ctx := context.Background()
			if tc.before != "" {
				if _, err := s.Pool().Exec(ctx, tc.before, h[:], start, start.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			tx := openTx(t, url, tc.during, h[:], start, start.Add(time.Hour))
			type result struct {
				r   sluice.Result
				err error
			}
			done := make(chan result, 1)
			go func() {
				r, err := s.AllowN(ctx, "k", hour, 5)
				done <- result{r, err}
			}()
			waitBlockedBy(t, s.Pool(), tx.Conn().PgConn().PID())
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := <-done
			want := sluice.Result{Remaining: 2, RetryAfter: 45 * time.Minute, ResetAfter: 45 * time.Minute}
			if got.err != nil || got.r != want {
				t.Errorf("AllowN(5) behind a commit of 8 of 10 = %+v, %v; want %+v", got.r, got.err, want)
			}
		})
	}
}

// waitBlockedBy waits until a backend of the database waits on a lock the
// backend pid holds.
func waitBlockedBy(t *testing.T, pool *pgxpool.Pool, pid uint32) {
	t.Helper()
	storetest.WaitFor(t, "a decision to wait on the open transaction", func() bool {
		var n int
		err := pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))", int32(pid)).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// TestRefusalWaitsOnNoLock: a decision refused on the period's committed
// count is answered while another transaction holds the row locked (an
// admission in flight, say): a client past its quota does not queue behind
// the row's writers.
func TestRefusalWaitsOnNoLock(t *testing.T) {
	s, url := open(t, clocktest.At(time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)))
	ctx := context.Background()
	if r, err := s.AllowN(ctx, "spent", hour, 9); err != nil || !r.Allowed {
		t.Fatalf("spending 9 of 10: %+v, %v", r, err)
	}
	openTx(t, url, "SELECT * FROM sluice_usage FOR UPDATE")
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	want := sluice.Result{Remaining: 1, RetryAfter: 45 * time.Minute, ResetAfter: 45 * time.Minute}
	if r, err := s.AllowN(dctx, "spent", hour, 2); err != nil || r != want {
		t.Errorf("AllowN(2) on 9 of 10, the row locked elsewhere = %+v, %v; want %+v at once", r, err, want)
	}
}
