package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// commandCalls returns the calls of each command since CONFIG RESETSTAT,
// from INFO commandstats, by lowercase name.
func commandCalls(t *testing.T, srv *redistest.Server) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+)`).FindAllStringSubmatch(srv.Do(t, "INFO", "commandstats"), -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}

// An admitted take in the window its key already counts writes the count
// alone: the window's end and the key's expiry were written when the
// window started and do not change, so the take is HMGET and HINCRBY, and
// a refusal HMGET alone. A take that starts a window writes its end, the
// count and the expiry. Both with every decision its own script call and
// coalesced; on a fixed window and on a calendar one, which share the
// state.
func TestWindowTakeInItsWindowWritesOnlyTheCount(t *testing.T) {
	loc := time.UTC
	for _, c := range []struct {
		name string
		lim  sluice.Limit
		next time.Duration // from the first window into the next
		wait time.Duration
	}{
		{"fixed", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Minute}, time.Minute, 0},
		{"fixed/coalesced", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Minute}, time.Minute, time.Millisecond},
		{"calendar-day", sluice.PerCalendar(10, sluice.Calendar{Location: loc, Unit: sluice.CalendarDay}), 24 * time.Hour, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			clock := clocktest.At(time.Date(2026, 3, 4, 5, 6, 7, 0, loc))
			s := openConfig(t, redisstore.Config{URL: "redis://" + srv.Addr, CoalesceWait: c.wait}, clock)
			ctx := context.Background()
			take := func(want bool) {
				t.Helper()
				r, err := s.Allow(ctx, "writes", c.lim)
				if err != nil || r.Allowed != want {
					t.Fatalf("Allow = %+v, %v; want Allowed %v", r, err, want)
				}
			}
			take(true) // the window starts: scripts loaded
			srv.Do(t, "CONFIG", "RESETSTAT")
			for range 9 {
				take(true)
			}
			take(false)
			got := commandCalls(t, srv)
			if got["hmget"] != 10 || got["hincrby"] != 9 || got["hset"] != 0 || got["pexpire"] != 0 {
				t.Errorf("9 admitted takes and a refusal in one window: hmget %d, hincrby %d, hset %d, pexpire %d; want 10, 9, 0, 0",
					got["hmget"], got["hincrby"], got["hset"], got["pexpire"])
			}
			clock.Advance(c.next)
			srv.Do(t, "CONFIG", "RESETSTAT")
			take(true)
			got = commandCalls(t, srv)
			if got["hmget"] != 1 || got["hincrby"] != 0 || got["hset"] != 1 || got["pexpire"] != 1 {
				t.Errorf("the next window's first take: hmget %d, hincrby %d, hset %d, pexpire %d; want 1, 0, 1, 1",
					got["hmget"], got["hincrby"], got["hset"], got["pexpire"])
			}
			pttl, err := strconv.ParseInt(strings.TrimSpace(srv.Do(t, "PTTL", s.LimitKey(c.lim, "writes"))), 10, 64)
			if err != nil || pttl <= 0 || pttl > c.next.Milliseconds() {
				t.Errorf("PTTL %d ms (%v), want in (0, %d]", pttl, err, c.next.Milliseconds())
			}
		})
	}
}

// A rolling upgrade runs the scripts of two releases on one Redis: a key
// written by the previous release's fixed window (testdata/before-hincrby,
// which wrote the window's end, the count and the expiry on every admitted
// take) is decided by this one as that one would decide it, and the other
// way round. Random sequences of takes, peeks, charges and refunds, with
// steps forward and back, each step run by a release drawn at random on
// one key and by the previous release alone on another: the replies and
// the stored fields agree at every step, and the key has an expiry.
func TestWindowScriptsAgreeWithThePreviousReleaseOnOneKey(t *testing.T) {
	srv := redistest.Single(t)
	read := func(name string) string {
		b, err := os.ReadFile("testdata/before-hincrby/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	prev := read("prelude.lua") + "\n" + read("fixed_window.lua")
	cur := redisstore.ScriptText("fixed_window.lua")
	prevCal := read("prelude.lua") + "\n" + read("calendar_window.lua")
	curCal := redisstore.ScriptText("calendar_window.lua")
	modes := []string{"take", "take", "take", "take", "peek", "refund", "charge"}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		p := []int64{1, 2, 60}[rng.IntN(3)] * 1_000_000
		rate := 1 + rng.IntN(5)
		// Whole seconds, as the periods: a key's time to live, which runs
		// on Redis's clock, is then 1 s at least, more than a step takes.
		sec := func(n int64) int64 { return rng.Int64N(n/1_000_000+1) * 1_000_000 }
		now := int64(1_700_000_000_000_000) + sec(10*p)
		cal := seed%4 == 3 // calendar_window.lua on periods of p
		mixed, alone := fmt.Sprintf("upgrade:%d:mixed", seed), fmt.Sprintf("upgrade:%d:alone", seed)
		srv.Do(t, "DEL", mixed, alone)
		for step := range 30 {
			switch r := rng.IntN(10); {
			case r < 5:
				now += sec(p / 2)
			case r < 8:
				now += sec(2 * p)
			default:
				now -= sec(2 * p) // the clock steps back
			}
			mode := modes[rng.IntN(len(modes))]
			if cal && mode == "charge" {
				mode = "take" // calendar_window.lua has no charge
			}
			cost := strconv.Itoa(rng.IntN(rate + 1))
			args := []string{mode, strconv.FormatInt(now, 10), strconv.FormatInt(p, 10), strconv.Itoa(rate), cost}
			script, prevScript := cur, prev
			if cal {
				s := now - now%p
				args = []string{mode, strconv.FormatInt(now, 10), strconv.FormatInt(s, 10), strconv.Itoa(rate), cost,
					strconv.FormatInt(s+p, 10), strconv.FormatInt(s+2*p, 10)}
				script, prevScript = curCal, prevCal
			}
			by := "the previous"
			if rng.IntN(2) == 0 {
				by = "this"
			} else {
				script = prevScript
			}
			got := srv.Do(t, append([]string{"EVAL", script, "1", mixed}, args...)...)
			want := srv.Do(t, append([]string{"EVAL", prevScript, "1", alone}, args...)...)
			if got != want {
				t.Fatalf("seed %d step %d: %v by %s release = %q, previous release alone %q", seed, step, args, by, got, want)
			}
			if g, w := srv.Do(t, "HGETALL", mixed), srv.Do(t, "HGETALL", alone); sortedFields(g) != sortedFields(w) {
				t.Fatalf("seed %d step %d: after %v by %s release the key holds %q, by the previous release alone %q", seed, step, args, by, g, w)
			}
			if srv.Do(t, "EXISTS", mixed) == "1" && srv.Do(t, "PTTL", mixed) == "-1" {
				t.Fatalf("seed %d step %d: after %v by %s release the key has no expiry", seed, step, args, by)
			}
		}
	}
}

// sortedFields is HGETALL's reply (field and value lines) as field=value
// pairs in field order.
func sortedFields(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	m := map[string]string{}
	for i := 0; i+1 < len(lines); i += 2 {
		m[lines[i]] = lines[i+1]
	}
	return fmt.Sprint(m) // fmt prints maps in key order
}
