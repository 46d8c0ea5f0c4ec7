package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

// load is a number of goroutines deciding on one key until stopped,
// counting what they were told.
type load struct {
	admitted, failed, inDoubt atomic.Int64
	stop                      chan struct{}
	wg                        sync.WaitGroup
}

// TestRestartMidLoadLosesAndDoublesNothing stops PostgreSQL (a fast
// shutdown, as an operator's; and an immediate one, as a crash's) while 16
// goroutines decide on one quota, starts it again, and
// checks that decisions fail while it is down (the failure policy is the
// caller's: package failsafe wraps stores), succeed again after, and that
// the ledger's count is the number of admissions the callers were told of:
// none lost, none doubled. The one count a caller cannot know is that of a
// call whose connection broke after its statement was sent (it may have
// committed): the count may exceed the admissions by at most those calls,
// and equals them when there were none.
func TestRestartMidLoadLosesAndDoublesNothing(t *testing.T) {
	srv := pgtest.StartServer(t)
	t.Run("stop", func(t *testing.T) { restartMidLoad(t, srv, (*pgtest.Server).Stop) })
	t.Run("crash", func(t *testing.T) { restartMidLoad(t, srv, (*pgtest.Server).Crash) })
}

// restartMidLoad runs the load on a fresh schema of srv, stops srv with
// stop and starts it again.
func restartMidLoad(t *testing.T, srv *pgtest.Server, stop func(*pgtest.Server) error) {
	s, _ := openURL(t, srv.Schema(t)+"&pool_max_conns=16", nil)
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1 << 40, Period: sluice.MaxPeriod}
	const key = "crash"
	l := &load{stop: make(chan struct{})}
	for range 16 {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				r, err := s.Allow(ctx, key, lim)
				cancel()
				switch {
				case errors.Is(err, sluice.ErrBadInput):
					t.Error(err)
					return
				case err != nil:
					l.failed.Add(1)
					var connect *pgconn.ConnectError
					if !pgconn.SafeToRetry(err) && !errors.As(err, &connect) {
						l.inDoubt.Add(1)
					}
					time.Sleep(time.Millisecond) // a real failing call takes time too
				case r.Allowed:
					l.admitted.Add(1)
				}
			}
		})
	}
	stopped := false
	defer func() {
		if !stopped {
			close(l.stop)
			l.wg.Wait()
		}
	}()
	storetest.WaitFor(t, "200 admissions before the stop", func() bool { return l.admitted.Load() >= 200 })
	if err := stop(srv); err != nil {
		t.Fatal(err)
	}
	before := l.failed.Load()
	storetest.WaitFor(t, "20 failures while PostgreSQL is down", func() bool { return l.failed.Load()-before >= 20 })
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := l.admitted.Load()
	storetest.WaitFor(t, "200 admissions after the restart", func() bool { return l.admitted.Load()-restarted >= 200 })
	close(l.stop)
	l.wg.Wait()
	stopped = true

	u, err := s.Usage(context.Background(), key)
	if err != nil || len(u) != 1 {
		t.Fatalf("Usage = %+v, %v; want one period", u, err)
	}
	admitted, inDoubt := l.admitted.Load(), l.inDoubt.Load()
	t.Logf("admitted %d, failed %d (in doubt %d), ledger %d", admitted, l.failed.Load(), inDoubt, u[0].Count)
	if u[0].Count < admitted || u[0].Count > admitted+inDoubt {
		t.Errorf("the ledger counts %d; the callers were told of %d admissions (and %d calls broke in flight)", u[0].Count, admitted, inDoubt)
	}
}

// TestNoMigrateStartsWhileDown: with NoMigrate, Open succeeds while the
// database is down, decisions fail until it is back, and once Migrate has
// run they succeed.
func TestNoMigrateStartsWhileDown(t *testing.T) {
	srv := pgtest.StartServer(t)
	url := srv.Schema(t)
	// Stop with no client connected: Schema's connections are closed.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, url, pgstore.Config{NoMigrate: true})
	if err != nil {
		t.Fatalf("Open with NoMigrate while the database is down: %v", err)
	}
	defer s.Close()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: time.Hour}
	if _, err := s.Allow(ctx, "k", lim); err == nil || errors.Is(err, sluice.ErrBadInput) {
		t.Fatalf("Allow while the database is down: %v, want a backend error", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, s.Pool()); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Allow(ctx, "k", lim); err != nil || !r.Allowed || r.Remaining != 4 {
		t.Fatalf("Allow after Migrate = %+v, %v; want allowed, remaining 4", r, err)
	}
}
