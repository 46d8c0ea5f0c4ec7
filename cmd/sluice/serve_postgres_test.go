//go:build unix

package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/pgtest"
)

// cfgQuota is a fixed-window quota of n per day for user, which pgstore
// holds.
func cfgQuota(n int) string {
	return fmt.Sprintf("domain: q\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: day\n      requests_per_unit: %d\n", n)
}

const reqAlice = `{"domain":"q","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`

// noPostgres is a PostgreSQL URL where nothing listens: serve refuses
// rules and settings before connecting, and -migrate=false never
// connects at start.
const noPostgres = "postgres://postgres@127.0.0.1:1/sluice?connect_timeout=2"

// storeCount is the count of every period of every key in the store at url.
func storeCount(t *testing.T, url string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int64
	if err := pgtest.Connect(t, url).QueryRow(ctx, "SELECT coalesce(sum(count), 0) FROM sluice_usage").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Serve on a real PostgreSQL: the quota admits up to its limit, then
// OVER_LIMIT (429), counted in the database; sluice migrate twice applies
// the schema once; reservations hold at most B−1 units per process and
// give them back at shutdown. One server, a schema per subtest.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	srv := pgtest.StartServer(t)

	t.Run("quota admits up to its limit then over limit", func(t *testing.T) {
		url := srv.Schema(t)
		path := filepath.Join(t.TempDir(), "q.yaml")
		writeFile(t, path, cfgQuota(3))
		s := launch(t, "-config", path, "-store", url)
		var codes []int
		for range 4 {
			codes = append(codes, post(t, s.url, reqAlice))
		}
		if fmt.Sprint(codes) != "[200 200 200 429]" {
			t.Fatalf("codes %v, want [200 200 200 429]", codes)
		}
		if n := storeCount(t, url); n != 3 {
			t.Errorf("the database counts %d, want 3", n)
		}
		if !strings.Contains(s.stderr.String(), "failure_mode=closed") {
			t.Errorf("the start-up log does not say quotas fail closed: %s", s.stderr.String())
		}
	})

	t.Run("-max-keys-per-group bounds the distinct keys of a group", func(t *testing.T) {
		url := srv.Schema(t)
		path := filepath.Join(t.TempDir(), "q.yaml")
		writeFile(t, path, cfgQuota(3))
		s := launch(t, "-config", path, "-store", url, "-max-keys-per-group", "2")
		var codes []int
		for _, user := range []string{"a", "b", "c", "a"} {
			codes = append(codes, post(t, s.url, strings.Replace(reqAlice, "alice", user, 1)))
		}
		if fmt.Sprint(codes) != "[200 200 400 200]" {
			t.Fatalf("codes for users a, b, c, a: %v, want [200 200 400 200] (the third key past the bound of 2)", codes)
		}
	})

	t.Run("migrate twice applies the schema once", func(t *testing.T) {
		url := srv.Schema(t)
		_, out := runCase{[]string{"migrate", url}, 0, "applied 0001_usage.sql", ""}.check(t)
		if strings.Contains(out, "nothing applied") {
			t.Errorf("first migrate: %q", out)
		}
		_, out = runCase{[]string{"migrate", "-store", url}, 0, "nothing applied", ""}.check(t)
		if strings.Contains(out, "applied 0") {
			t.Errorf("second migrate applied again: %q", out)
		}
		// The schema is then all serve needs with -migrate=false, which
		// connects in the background and is then healthy.
		path := filepath.Join(t.TempDir(), "q.yaml")
		writeFile(t, path, cfgQuota(1))
		s := launch(t, "-config", path, "-store", url, "-migrate=false", "-health-needs-store")
		eventually(t, "healthy once the database answered", func() bool {
			resp, err := http.Get(s.url + "/healthcheck")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		if a, b := post(t, s.url, reqAlice), post(t, s.url, reqAlice); a != 200 || b != 429 {
			t.Errorf("serve -migrate=false on a migrated schema: %d, %d; want 200, 429", a, b)
		}
	})

	t.Run("migrate prune deletes the periods that ended before its age", func(t *testing.T) {
		url := srv.Schema(t)
		runCase{[]string{"migrate", url}, 0, "applied 0004_billable.sql", ""}.check(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn := pgtest.Connect(t, url)
		now := time.Now()
		for i, ended := range []time.Time{now.AddDate(0, 0, -100), now.AddDate(0, 0, -91), now.AddDate(0, 0, -89), now.Add(time.Hour)} {
			if _, err := conn.Exec(ctx, `INSERT INTO sluice_usage (key_hash, period_start, period_end, key, count, quota)
VALUES (sha256($1), $2, $3, $1, 1, 1)`, []byte(fmt.Sprint("k", i)), ended.AddDate(0, 0, -30), ended); err != nil {
				t.Fatal(err)
			}
		}
		// A rule that is not billable: its period that ended an hour ago
		// goes whatever its age, its period still counting stays.
		for i, ended := range []time.Time{now.Add(-time.Hour), now.Add(time.Hour)} {
			if _, err := conn.Exec(ctx, `INSERT INTO sluice_usage (key_hash, period_start, period_end, key, count, quota, billable)
VALUES (sha256($1), $2, $3, $1, 1, 1, false)`, []byte(fmt.Sprint("transient", i)), ended.Add(-time.Hour), ended); err != nil {
				t.Fatal(err)
			}
		}
		runCase{[]string{"migrate", "prune", "-older-than", "90d", url}, 0, "deleted 1 rows of rules that are not billable", ""}.check(t)
		if n := storeCount(t, url); n != 3 {
			t.Errorf("%d rows left, want the 2 billable periods that ended less than 90 days ago and the open one that is not billable", n)
		}
		runCase{[]string{"migrate", "prune", "-older-than", "2160h", "-store", url}, 0, "deleted 0 ledger rows", ""}.check(t)
	})

	t.Run("a local share decides first in each process", func(t *testing.T) {
		url := srv.Schema(t)
		path := filepath.Join(t.TempDir(), "q.yaml")
		writeFile(t, path, cfgQuota(10))
		one, two := launch(t, "-config", path, "-store", url, "-local-share", "3"), launch(t, "-config", path, "-store", url, "-local-share", "3")
		got := 0
		for range 6 {
			if post(t, one.url, reqAlice) == 200 {
				got++
			}
		}
		if got != 3 || storeCount(t, url) != 3 {
			t.Errorf("one process admitted %d of 6 (the database counts %d); want its share of 10 in 3, rounded down as failsafe.Split rounds: 3", got, storeCount(t, url))
		}
		for range 6 {
			post(t, two.url, reqAlice)
		}
		if n := storeCount(t, url); n != 6 {
			t.Errorf("two processes: the database counts %d, want two shares, 6", n)
		}
	})

	t.Run("reservations hold at most B-1 per process and are refunded at shutdown", func(t *testing.T) {
		testReservations(t, srv.Schema(t))
	})
}

// testReservations runs three serve processes (OS processes of this test
// binary) with -reserve-units 5 and a long hold on one
// quota of 30: at every moment the database counts at most 3×(5−1) units
// over what was admitted (exactly that once each has reserved and spent
// one), never more than the quota is admitted; a process that shuts down
// gives its 4 back; once all have, the database counts exactly what was
// admitted, so a fresh process admits the rest: exactly the quota in all.
func testReservations(t *testing.T, url string) {
	const procs, batch, quota = 3, 5, 30
	path := filepath.Join(t.TempDir(), "q.yaml")
	writeFile(t, path, cfgQuota(quota))
	day := time.Now().UTC().YearDay()
	var ss []*process
	for range procs {
		// -store-timeout 5s: this test counts reservations, not deadlines;
		// under a loaded test run a burst on one key (at most
		// pgstore's PerKey statements at once, the rest waiting their
		// turn) outlasted the 250 ms default, and the failure mode's
		// 429s left fewer admitted than the test's bound.
		ss = append(ss, startServeProcess(t, "-config", path, "-store", url, "-reserve-units", fmt.Sprint(batch), "-reserve-hold", "1h", "-store-timeout", "5s"))
	}
	var admitted atomic.Int64
	held := func(when string) {
		t.Helper()
		n, a := storeCount(t, url), admitted.Load()
		if n < a || n-a > procs*(batch-1) || a > quota {
			t.Fatalf("%s: the database counts %d for %d admitted: want between them at most %d held (quota %d)", when, n, a, procs*(batch-1), quota)
		}
	}
	// In turns: each process reserves once and spends 1 of its 5.
	for i := range procs {
		if code := post(t, ss[i].httpURL, reqAlice); code != 200 {
			t.Fatalf("request %d: %d, want 200", i, code)
		}
		admitted.Add(1)
		held(fmt.Sprintf("after request %d", i))
	}
	if n, a := storeCount(t, url), admitted.Load(); n-a != procs*(batch-1) {
		t.Fatalf("the database counts %d for %d admitted: want the bound, %d held", n, a, procs*(batch-1))
	}
	// The first process stops: its 4 units go back.
	ss[0].stop(t, 15*time.Second)
	if !strings.Contains(ss[0].stderr.String(), "reservations refunded at shutdown") || !strings.Contains(ss[0].stderr.String(), fmt.Sprintf("units=%d", batch-1)) {
		t.Errorf("no refund of %d units logged at shutdown: %s", batch-1, ss[0].stderr.String())
	}
	if n, a := storeCount(t, url), admitted.Load(); n-a != (procs-1)*(batch-1) {
		t.Fatalf("after one process stopped the database counts %d for %d admitted: want %d held", n, a, (procs-1)*(batch-1))
	}
	ss = ss[1:]
	// Then all at once, twice the quota.
	burstAcross(t, ss, 2*quota, &admitted)
	held("after the burst")
	if a := admitted.Load(); a < quota-procs*(batch-1) {
		t.Errorf("admitted %d: want at least the quota %d less what the processes hold, %d", a, quota, quota-procs*(batch-1))
	}
	for _, p := range ss {
		p.stop(t, 15*time.Second)
	}
	if n, a := storeCount(t, url), admitted.Load(); n != a {
		t.Errorf("after shutdown the database counts %d for %d admitted: the reservations were not all refunded", n, a)
		for _, p := range ss {
			t.Logf("a process's log: %s", p.stderr.String())
		}
	}
	// A process without reservations takes the rest, and no more.
	lastTakesTheRest(t, url, path, quota, day, &admitted)
}

// burstAcross sends n requests for alice at once, spread over the
// processes ss, and adds the admitted ones to admitted.
func burstAcross(t *testing.T, ss []*process, n int, admitted *atomic.Int64) {
	t.Helper()
	var wg sync.WaitGroup
	var codesMu sync.Mutex
	codes := map[int]int{}
	for i := range n {
		wg.Go(func() {
			code, err := status(http.DefaultClient, ss[i%len(ss)].httpURL, reqAlice)
			if err != nil {
				t.Error(err)
				return
			}
			if code == 200 {
				admitted.Add(1)
			}
			codesMu.Lock()
			codes[code]++
			codesMu.Unlock()
		})
	}
	wg.Wait()
	failed := 0.0
	for _, p := range ss {
		failed += metricSum(t, p.httpURL, "sluice_rls_store_errors_total")
	}
	t.Logf("the burst's answers: %v; %v decisions failed", codes, failed)
}

// lastTakesTheRest starts serve without reservations on the quota's
// config at path and store url, and checks that with what admitted counts
// it admits exactly the quota in all (the test is skipped if it straddled
// midnight UTC, the start of day of the year day).
func lastTakesTheRest(t *testing.T, url, path string, quota, day int, admitted *atomic.Int64) {
	t.Helper()
	s := launch(t, "-config", path, "-store", url)
	for range quota {
		if post(t, s.url, reqAlice) == 200 {
			admitted.Add(1)
		}
	}
	if time.Now().UTC().YearDay() != day {
		t.Skip("the test straddled midnight UTC, when the daily quota starts again")
	}
	// A decision of this process that failed (past its 250 ms on a loaded
	// machine) was refused, and may have been counted all the same.
	failedLast := int64(metricSum(t, s.url, "sluice_rls_store_errors_total"))
	if a := admitted.Load(); a > int64(quota) || a < int64(quota)-failedLast || (failedLast == 0 && a != int64(quota)) {
		t.Errorf("admitted %d in all, want exactly the quota %d (less at most one per failed decision of the last process: %d)", a, quota, failedLast)
	}
}

// Quotas fail closed on PostgreSQL unless -failure-mode says otherwise:
// with the database down (-migrate=false starts without it), a decision
// is refused, and -health-needs-store reports NOT_SERVING; with
// -failure-mode open it is admitted. Redis's variables are named as not
// acted on. No PostgreSQL needed.
func TestServePostgresDownFailsClosedByDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.yaml")
	writeFile(t, path, cfgQuota(100))
	t.Setenv("REDIS_POOL_SIZE", "10")
	s := launch(t, "-config", path, "-store", noPostgres, "-migrate=false", "-health-needs-store")
	if !strings.Contains(s.stderr.String(), "REDIS_POOL_SIZE (the store is PostgreSQL)") {
		t.Errorf("REDIS_POOL_SIZE is not named as not acted on: %s", s.stderr.String())
	}
	if code := post(t, s.url, reqAlice); code == 200 {
		t.Errorf("a decision with PostgreSQL down was admitted (%d): quotas must fail closed by default", code)
	}
	if resp, err := http.Get(s.url + "/healthcheck"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("healthcheck with PostgreSQL down and -health-needs-store: %v %v, want 503", resp, err)
	} else {
		resp.Body.Close()
	}
	if !strings.Contains(s.stderr.String(), "failure_mode=closed") {
		t.Errorf("the start-up log does not say quotas fail closed: %s", s.stderr.String())
	}
	open := launch(t, "-config", path, "-store", noPostgres, "-migrate=false", "-failure-mode", "open")
	if code := post(t, open.url, reqAlice); code != 200 {
		t.Errorf("-failure-mode open with PostgreSQL down: %d, want 200", code)
	}
}

// A rule pgstore cannot hold (any algorithm but fixed_window) is refused at
// start with its file:line, before any connection; as are settings that
// do not go with PostgreSQL. `sluice migrate`'s usage errors are exit 2,
// an unreachable database exit 1.
func TestServePostgresRefusesWhatItCannotDo(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "tb.yaml")
	writeFile(t, bad, "domain: q\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: second\n      requests_per_unit: 10\n      algorithm: token_bucket\n      burst: 10\n")
	good := filepath.Join(dir, "q.yaml")
	writeFile(t, good, cfgQuota(10))
	serveArgs := func(args ...string) []string {
		return append([]string{"serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, args...)
	}
	for _, tt := range []runCase{
		{serveArgs("-config", bad, "-store", noPostgres), 1, "", bad + ":5"},
		{serveArgs("-config", bad, "-store", "postgresql://127.0.0.1:1/x"), 1, "", "fixed_window"},
		{serveArgs("-config", good, "-store", noPostgres, "-redis-key-format", "envoy"), 2, "", "PostgreSQL has no Redis keys"},
		{serveArgs("-config", good, "-reserve-units", "5"), 2, "", "need a remote store"},
		{serveArgs("-config", good, "-store", noPostgres, "-reserve-units", "1"), 2, "", "-reserve-units 1"},
		{serveArgs("-config", good, "-store", "redis://127.0.0.1:1", "-migrate"), 2, "", "only a PostgreSQL -store"},
		{serveArgs("-config", good, "-max-keys-per-group", "10"), 2, "", "-max-keys-per-group: only a PostgreSQL -store"},
		{serveArgs("-config", good, "-store", noPostgres, "-max-keys-per-group", "-1"), 2, "", "-max-keys-per-group -1"},
		{[]string{"migrate"}, 2, "", "give the database's URL"},
		{[]string{"migrate", "redis://127.0.0.1:1"}, 2, "", "not a PostgreSQL URL"},
		{[]string{"migrate", "-store", noPostgres, noPostgres}, 2, "", "not both"},
		{[]string{"migrate", "-timeout", "5s", noPostgres}, 1, "", "127.0.0.1:1"},
		{[]string{"migrate", "prune", noPostgres}, 2, "", "-older-than is required"},
		{[]string{"migrate", "prune", "-older-than", "-3d", noPostgres}, 2, "", `-older-than "-3d"`},
		{[]string{"migrate", "prune", "-older-than", "soon", noPostgres}, 2, "", `-older-than "soon"`},
		{[]string{"migrate", "prune", "-older-than", "90d", "redis://127.0.0.1:1"}, 2, "", "not a PostgreSQL URL"},
		{[]string{"migrate", "prune", "-older-than", "90d"}, 2, "", "give the database's URL"},
		{[]string{"migrate", "prune", "-h"}, 0, "Usage: sluice migrate prune", ""},
		{[]string{"help", "migrate"}, 0, "Usage: sluice migrate", ""},
		{[]string{"help"}, 0, "migrate", ""},
	} {
		tt.check(t)
	}
}

// startServeProcess runs `sluice serve args` as a child process on free
// loopback ports (see startProcess).
func startServeProcess(t *testing.T, args ...string) *process {
	t.Helper()
	return startProcess(t, ":", append([]string{"serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, args...)...)
}

// PostgreSQL stopped under serve: decisions fail closed (the default on
// PostgreSQL) and are not counted; once it is back, serve decides on it
// again by itself, and the database counts exactly the requests admitted,
// none lost and none doubled.
func TestServePostgresRestartFailsClosedThenResumes(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	srv := pgtest.StartServer(t)
	url := srv.Schema(t)
	path := filepath.Join(t.TempDir(), "q.yaml")
	writeFile(t, path, cfgQuota(1000))
	s := launch(t, "-config", path, "-store", url)
	admitted := 0
	for range 5 {
		if post(t, s.url, reqAlice) == 200 {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d of 5 with the database up", admitted)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if code := post(t, s.url, reqAlice); code == 200 {
			t.Errorf("request %d with the database down: 200, want a refusal (quotas fail closed)", i)
		}
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // the breaker's back-off, doubling from 1 s
	for ok := false; !ok; {
		if time.Now().After(deadline) {
			t.Fatalf("no request admitted within 30 s of the database's return: %s", s.stderr.String())
		}
		if ok = post(t, s.url, reqAlice) == 200; ok {
			admitted++
		} else {
			time.Sleep(100 * time.Millisecond) // waiting for the breaker's probe
		}
	}
	for range 5 {
		if post(t, s.url, reqAlice) == 200 {
			admitted++
		}
	}
	if n := storeCount(t, url); n != int64(admitted) {
		t.Errorf("the database counts %d, and %d were admitted", n, admitted)
	}
}
