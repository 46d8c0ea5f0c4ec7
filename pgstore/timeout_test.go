package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

// slowWrites installs, in the store's schema, a trigger that makes every
// write of a row of sluice_usage (of the key only, when only is not empty)
// sleep for a random time up to maxSleep while it holds the row's lock: a
// slow PostgreSQL, on purpose.
func slowWrites(t *testing.T, s *pgstore.Store, maxSleep time.Duration, only string) {
	t.Helper()
	cond := "true"
	if only != "" {
		cond = fmt.Sprintf("NEW.key = convert_to(%s, 'UTF8')", quoteLiteral(only))
	}
	sql := fmt.Sprintf(`CREATE FUNCTION slow_usage() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	IF %s THEN PERFORM pg_sleep(random() * %g); END IF;
	RETURN NEW;
END $f$;
CREATE TRIGGER slow_usage BEFORE INSERT OR UPDATE ON sluice_usage FOR EACH ROW EXECUTE FUNCTION slow_usage();`, cond, maxSleep.Seconds())
	if _, err := s.Pool().Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestTimedOutDecisionsAreNotBilled: 8 goroutines decide on 80 keys (one decision each) of a
// PostgreSQL whose writes take up to 400 ms, each decision given 250 ms, so
// that many time out while PostgreSQL works on them. Every decision that
// was not answered "admitted" must leave the ledger as it was: the ledger's
// count is exactly the admissions the callers were told of.
func TestTimedOutDecisionsAreNotBilled(t *testing.T) {
	s, _ := openURL(t, pgtest.Schema(t)+"&pool_max_conns=8", nil)
	slowWrites(t, s, 400*time.Millisecond, "")
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1 << 40, Period: sluice.MaxPeriod}
	keys := make([]string, 80)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	var admitted, failed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
				r, err := s.Allow(ctx, keys[g*10+i], lim)
				cancel()
				switch {
				case errors.Is(err, sluice.ErrBadInput):
					t.Error(err)
					return
				case err != nil:
					failed.Add(1)
				case r.Allowed:
					admitted.Add(1)
				default:
					t.Errorf("refused under a quota of 2^40: %+v", r)
				}
			}
		})
	}
	wg.Wait()
	var billed int64
	for _, k := range keys {
		u, err := s.Usage(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range u {
			billed += p.Count
		}
	}
	t.Logf("admitted %d, failed %d, ledger %d", admitted.Load(), failed.Load(), billed)
	if failed.Load() < 10 || admitted.Load() < 1 {
		t.Fatalf("admitted %d, failed %d of 80: the test wants some of each (the slow trigger did not slow enough, or too much)", admitted.Load(), failed.Load())
	}
	if billed != admitted.Load() {
		t.Errorf("the ledger counts %d units; the callers were told of %d admissions (%d decisions failed)", billed, admitted.Load(), failed.Load())
	}
}

// TestHotKeyLeavesConnectionsForOtherKeys: 48 goroutines deciding on one
// hot key, whose every write takes up to 40 ms under its row lock, with a
// pool of 8 connections, must not keep another key's decisions from a
// connection: 20 decisions of another key, each given 500 ms, are all
// answered by the store.
func TestHotKeyLeavesConnectionsForOtherKeys(t *testing.T) {
	s, _ := openURL(t, pgtest.Schema(t)+"&pool_max_conns=8", nil)
	slowWrites(t, s, 40*time.Millisecond, "hot")
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1 << 40, Period: sluice.MaxPeriod}
	stop := make(chan struct{})
	var hot atomic.Int64
	var wg sync.WaitGroup
	for range 48 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if r, err := s.Allow(ctx, "hot", lim); err == nil && r.Allowed {
					hot.Add(1)
				}
				cancel()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	storetest.WaitFor(t, "20 admissions of the hot key", func() bool { return hot.Load() >= 20 })
	answered := 0
	var slowest time.Duration
	var lastErr error
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		began := time.Now()
		r, err := s.Allow(ctx, "other", lim)
		cancel()
		slowest = max(slowest, time.Since(began))
		if err == nil && r.Allowed {
			answered++
		} else {
			lastErr = err
		}
	}
	t.Logf("other key: %d of 20 answered, slowest %v; hot key admitted %d meanwhile", answered, slowest, hot.Load())
	if answered != 20 {
		t.Errorf("another key's decisions answered %d of 20 within 500 ms behind a hot key (last error: %v)", answered, lastErr)
	}
}

// TestDecisionTimeoutStaysOutOfLongReads: a decision with a deadline
// leaves its connection's session bounded by about that deadline (the
// server's own bound on the statement); Usage and Ledger, which may run
// long, set it back to none before they read, and a decision without a
// deadline runs with none.
func TestDecisionTimeoutStaysOutOfLongReads(t *testing.T) {
	s, _ := openURL(t, pgtest.Schema(t)+"&pool_max_conns=1", nil)
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Hour}
	session := func() string {
		t.Helper()
		var v string
		if err := s.Pool().QueryRow(context.Background(), "SHOW statement_timeout").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	decide := func(d time.Duration) {
		t.Helper()
		ctx, cancel := context.Background(), func() {}
		if d > 0 {
			ctx, cancel = context.WithTimeout(ctx, d)
		}
		defer cancel()
		if r, err := s.Allow(ctx, "k", lim); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
	}
	decide(2 * time.Second)
	if v := session(); v != "2s" {
		t.Errorf("after a decision given 2 s, the session's statement_timeout is %q, want 2s", v)
	}
	if _, err := s.Usage(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if v := session(); v != "0" {
		t.Errorf("after Usage, statement_timeout is %q, want 0", v)
	}
	decide(2 * time.Second)
	if err := s.Ledger(context.Background(), time.Time{}, time.Now().Add(time.Hour), func(pgstore.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if v := session(); v != "0" {
		t.Errorf("after Ledger, statement_timeout is %q, want 0", v)
	}
	decide(2 * time.Second)
	decide(0)
	if v := session(); v != "0" {
		t.Errorf("after a decision without a deadline, statement_timeout is %q, want 0", v)
	}
}

// TestUnansweredDecisionIsInDoubt: a decision whose answer has not come
// Config.Settle after it was sent (here: no deadline, a row held locked
// by another transaction) is given up with an error wrapping
// pgstore.ErrInDoubt, not left waiting, and its connection is not reused.
func TestUnansweredDecisionIsInDoubt(t *testing.T) {
	url := pgtest.Schema(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, url, pgstore.Config{Settle: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Hour}
	if _, err := s.Allow(ctx, "held", lim); err != nil {
		t.Fatal(err)
	}
	tx := openTx(t, url, "SELECT * FROM sluice_usage FOR UPDATE")
	began := time.Now()
	_, err = s.Allow(ctx, "held", lim)
	took := time.Since(began)
	if !errors.Is(err, pgstore.ErrInDoubt) || took > 5*time.Second {
		t.Fatalf("Allow on a row locked elsewhere, no deadline, Settle 300ms = %v after %v; want ErrInDoubt after about 300ms", err, took)
	}
	tx.Rollback(ctx)
	if r, err := s.Allow(ctx, "held", lim); err != nil || !r.Allowed {
		t.Errorf("Allow once the lock is gone = %+v, %v; want admitted on a fresh connection", r, err)
	}
}

// A Peek is bounded by its own context, not by the statement_timeout a
// decision with a short deadline left on the pooled connection: on a pool
// of one connection, after a decision given 50 ms (which sets the
// session's statement_timeout to 50 ms), a Peek given 10 s that waits
// 300 ms on a lock of the table answers. Before, PostgreSQL cancelled it
// after 50 ms ("canceling statement due to statement timeout").
func TestPeekIsNotCutByAnEarlierDecisionsStatementTimeout(t *testing.T) {
	url := pgtest.Schema(t)
	s, _ := openURL(t, url+"&pool_max_conns=1", nil)
	ctx := context.Background()
	if _, err := s.Allow(ctx, "k", hour); err != nil { // the row the Peek reads
		t.Fatal(err)
	}
	if _, err := s.Peek(ctx, "k", hour); err != nil { // its statement prepared on the connection
		t.Fatal(err)
	}
	var err error
	for range 20 { // until one is sent in time: it sets the session's timeout
		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err = s.Allow(dctx, "other", hour)
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no decision with a 50 ms deadline answered in 20 tries: %v", err)
	}

	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE sluice_usage IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { tx.Rollback(ctx); close(released) })
	defer func() { <-released }() // before locker closes
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := s.Peek(pctx, "k", hour)
	if err != nil {
		t.Fatalf("Peek with 10 s left, behind a 300 ms lock: %v", err)
	}
	if r.Remaining != hour.Rate-1 {
		t.Errorf("Peek = %+v, want %d remaining", r, hour.Rate-1)
	}
}
