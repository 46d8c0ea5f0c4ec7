package redisstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// announce is r.Announce that fails the test on an error.
func announce(t *testing.T, r *redisstore.Roster, id string, ttl time.Duration, most int) int {
	t.Helper()
	n, err := r.Announce(context.Background(), id, ttl, most)
	if err != nil {
		t.Fatalf("Announce(%s): %v", id, err)
	}
	return n
}

// Processes (stores with their own connections) on one Redis, and on a
// Cluster, count each other: a join is counted at the next announce, a
// member that leaves is gone at once, and one that stops announcing (a
// crashed process) is counted until its time to live has passed, and not
// after.
func TestRosterCountsLiveMembersAndForgetsTheSilentAfterTheirTTL(t *testing.T) {
	for name, url := range map[string]func(*testing.T) string{"single": func(t *testing.T) string { return singleURL(t) }, "cluster": clusterURL} {
		t.Run(name, func(t *testing.T) {
			clock := clocktest.New()
			u := url(t)
			fleet := "roster-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			a, b, c := open(t, u, clock).Roster(fleet), open(t, u, clock).Roster(fleet), open(t, u, clock).Roster(fleet)
			const ttl = 5 * time.Second
			if n := announce(t, a, "a", ttl, 100); n != 1 {
				t.Fatalf("a alone counts %d, want 1", n)
			}
			if n := announce(t, b, "b", ttl, 100); n != 2 {
				t.Fatalf("b after a counts %d, want 2", n)
			}
			if n := announce(t, c, "c", ttl, 100); n != 3 {
				t.Fatalf("c after a and b counts %d, want 3", n)
			}
			if n := announce(t, a, "a", ttl, 100); n != 3 {
				t.Fatalf("a again counts %d, want 3 (announcing twice is one member)", n)
			}
			if err := b.Leave(context.Background(), "b"); err != nil {
				t.Fatal(err)
			}
			if n := announce(t, a, "a", ttl, 100); n != 2 {
				t.Fatalf("after b left, a counts %d, want 2", n)
			}
			// c falls silent (killed). 4s later it is still counted; once
			// its 5s have passed since its last announce, it is not.
			clock.Advance(4 * time.Second)
			if n := announce(t, a, "a", ttl, 100); n != 2 {
				t.Fatalf("4s after c's last announce a counts %d, want 2 (c's ttl has not passed)", n)
			}
			clock.Advance(time.Second)
			if n := announce(t, a, "a", ttl, 100); n != 1 {
				t.Fatalf("5s after c's last announce a counts %d, want 1", n)
			}
			if n := announce(t, a, "a", ttl, 1); n != 1 {
				t.Fatalf("counting at most 1: %d", n)
			}
		})
	}
}

// Junk written into a roster's key by anything that can write to Redis
// cannot make the count unbounded, nor stay for ever: the count is at
// most what the caller asked for (so a share of a limit never rounds to
// nothing: see relief.Fleet); members whose expiry lies beyond
// MaxRosterTTL are removed, 1000 per announce; members with a plausible
// expiry count until it passes; and a key of another type is replaced.
func TestRosterBoundsWhatJunkMembersCost(t *testing.T) {
	srv := redistest.Single(t)
	clock := clocktest.New()
	url := "redis://" + srv.Addr
	fleet := "junk-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	key := redisstore.DefaultPrefix + ":fleet:{" + fleet + "}"
	r := open(t, url, clock).Roster(fleet)
	raw, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	ctx := context.Background()
	zadd := func(n int, expiry time.Time, tag string) {
		t.Helper()
		cmd := raw.B().Zadd().Key(key).ScoreMember()
		for i := range n {
			cmd = cmd.ScoreMember(float64(expiry.UnixMicro()), fmt.Sprintf("%s-%d", tag, i))
		}
		if err := raw.Do(ctx, cmd.Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	card := func() int64 {
		t.Helper()
		n, err := raw.Do(ctx, raw.B().Zcard().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const ttl = 5 * time.Second

	// 2,500 members that would live for ever (a year ahead): gone in three
	// announces, never counted.
	zadd(2500, clock.Now().Add(365*24*time.Hour), "forever")
	for i, want := range []int64{1501, 501, 1} {
		if n := announce(t, r, "me", ttl, 10_000); n != 1 {
			t.Fatalf("announce %d counts %d with far-future junk, want 1", i, n)
		}
		if got := card(); got != want {
			t.Fatalf("after announce %d the set holds %d members, want %d (1000 removed per announce)", i, got, want)
		}
	}

	// 20,000 members with a plausible expiry: counted, but at most as many
	// as the caller takes, and gone once their expiry passes.
	zadd(20_000, clock.Now().Add(30*time.Second), "flood")
	if n := announce(t, r, "me", ttl, 10_000); n != 10_000 {
		t.Fatalf("with 20,001 live members counting at most 10,000: %d", n)
	}
	clock.Advance(30 * time.Second)
	for range 20 {
		announce(t, r, "me", ttl, 10_000) // renews "me", removes 1000 expired
	}
	if n := announce(t, r, "me", ttl, 10_000); n != 1 {
		t.Fatalf("after the flood's expiry: %d, want 1", n)
	}

	// A key of another type is replaced, not an error for ever.
	if err := raw.Do(ctx, raw.B().Set().Key(key).Value("junk").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n := announce(t, r, "me", ttl, 10_000); n != 1 {
		t.Fatalf("after a string was written at the key: %d, want 1", n)
	}
}

// Bad input is refused before Redis is asked.
func TestRosterRefusesBadInput(t *testing.T) {
	r := open(t, singleURL(t), nil).Roster("bad-input")
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		id   string
		ttl  time.Duration
		most int
	}{
		{"empty id", "", time.Second, 1},
		{"long id", string(make([]byte, redisstore.MaxRosterName+1)), time.Second, 1},
		{"ttl 0", "a", 0, 1},
		{"ttl past the most", "a", redisstore.MaxRosterTTL + time.Second, 1},
		{"most 0", "a", time.Second, 0},
	} {
		if _, err := r.Announce(ctx, tt.id, tt.ttl, tt.most); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	if _, err := open(t, singleURL(t), nil).Roster("").Announce(ctx, "a", time.Second, 1); err == nil {
		t.Error("empty fleet name: no error")
	}
}

// BenchmarkRosterAnnounce is one process's announce, what -local-share
// auto costs Redis each second per process: with a fleet of 10, and with
// 20,000 junk members of a plausible expiry in the key. srv-µs/op is
// Redis's own time in the script (INFO commandstats).
func BenchmarkRosterAnnounce(b *testing.B) {
	for _, tt := range []struct {
		name  string
		extra int
	}{{"members=10", 9}, {"junk=20000", 20_000}} {
		b.Run(tt.name, func(b *testing.B) {
			srv := redistest.StartServer(b)
			url := "redis://" + srv.Addr
			r := open(b, url, nil).Roster("bench")
			ctx := context.Background()
			for i := range tt.extra {
				if _, err := r.Announce(ctx, fmt.Sprintf("other-%d", i), redisstore.MaxRosterTTL, 10_000); err != nil {
					b.Fatal(err)
				}
			}
			srv.Do(b, "CONFIG", "RESETSTAT")
			b.ResetTimer()
			for b.Loop() {
				if _, err := r.Announce(ctx, "me", 5*time.Second, 10_000); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stats := srv.Do(b, "INFO", "commandstats")
			if m := regexp.MustCompile(`cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([0-9.]+)`).FindStringSubmatch(stats); m != nil {
				us, _ := strconv.ParseFloat(m[1], 64)
				b.ReportMetric(us, "srv-µs/op")
			}
		})
	}
}

// The Roster says the longest time to live its Announce takes, so that a
// fleet set up with a longer one is refused at once rather than failing at
// every announce.
func TestRosterSaysTheLongestTTLItTakes(t *testing.T) {
	var r *redisstore.Roster
	if got := r.MaxTTL(); got != redisstore.MaxRosterTTL {
		t.Errorf("MaxTTL %v, want MaxRosterTTL %v", got, redisstore.MaxRosterTTL)
	}
}
