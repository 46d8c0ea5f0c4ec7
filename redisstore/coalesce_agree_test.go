package redisstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
)

// agreeLimits are the limits of the agreement test: two per script (an
// index in algorithms), a key always under the same one.
func agreeLimits(a sluice.Algorithm) [2]sluice.Limit {
	switch a {
	case bucketsScript:
		return [2]sluice.Limit{
			{Algorithm: sluice.SlidingWindow, Rate: 5, Period: time.Second, Buckets: 4},
			{Algorithm: sluice.SlidingWindow, Rate: 3, Period: 250 * time.Millisecond, Buckets: 2, CountRejected: true},
		}
	case momentsScript:
		return [2]sluice.Limit{
			{Algorithm: sluice.SlidingWindow, Rate: 5, Period: time.Second, Buckets: 4, Moments: 2},
			{Algorithm: sluice.SlidingWindow, Rate: 3, Period: 250 * time.Millisecond, Moments: 4, CountRejected: true},
		}
	}
	return [2]sluice.Limit{
		{Algorithm: a, Rate: 5, Period: time.Second, Burst: 5},
		{Algorithm: a, Rate: 3, Period: 250 * time.Millisecond, Burst: 6, CountRejected: true},
	}
}

// One call of the batch script makes each of its decisions exactly as the
// algorithm's own script makes it alone, in order, for every script (the
// sliding window's with buckets and with moments included) and mode, several decisions on one key included: random batches, replayed
// one script call per decision on keys of another prefix at the same
// instants, get the same answers. (The replay and the batch go in one
// MULTI, which takes each key's time to live away after each script: the
// test's clock is not Redis's, and a key gone before its state is as good
// as fresh by the test's clock would differ from one kept.)
func TestBatchScriptAgreesWithOneDecisionAtATime(t *testing.T) {
	url := "redis://" + redistest.Single(t).Addr
	clock := clocktest.New()
	alone, batched := agreeStore(t, url, "alone", clock), agreeStore(t, url, "batched", clock)
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for round := range 200 {
		clock.Advance(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
		for a := range sluice.Algorithm(len(algorithms)) {
			b := &batch{alg: a}
			replay := rueidis.Commands{alone.client.B().Multi().Build()}
			for range 1 + rng.IntN(maxBatch) {
				k := rng.IntN(4)
				key, lim := "k"+string(rune('a'+k)), agreeLimits(a)[k%2]
				mode, cost := agreeMode(rng, a), 1+rng.IntN(min(4, lim.Capacity())) // as sluice.Check allows
				if mode == "peek" {
					cost = 0
				}
				if mode == "charge" {
					cost = min(cost, 2*lim.Capacity())
				}
				args, err := batched.scriptArgs(nil, mode, lim, cost)
				if err != nil {
					t.Fatal(err)
				}
				keys := []string{alone.Key(a, key)} // and the key it seeds from, as the store sends it
				if k := predecessor(a); k != "" {
					keys = append(keys, string(appendKeyOf(nil, k, []string{alone.prefix, ":", "", ":{", key, "}"})))
				}
				replay = append(replay, alone.client.B().Eval().Script(singleScript(a)).Numkeys(int64(len(keys))).
					Key(keys...).Arg(args...).Build(), alone.client.B().Persist().Key(alone.Key(a, key)).Build())
				b.stride = len(args)
				b.add(ctx, args, []string{batched.prefix, ":", algorithms[a].short, ":{", key, "}"})
			}
			b.prepare()
			replay = append(replay, alone.client.B().Eval().Script(batchScript(a)).Numkeys(int64(len(b.keys))).
				Key(b.keys...).Arg(b.argv...).Build())
			for k := range 4 {
				replay = append(replay, alone.client.B().Persist().Key(batched.Key(a, "k"+string(rune('a'+k)))).Build())
			}
			replies := alone.client.DoMulti(ctx, append(replay, alone.client.B().Exec().Build())...)
			want, err := replies[len(replies)-1].ToArray()
			if err != nil || len(want) != 2*b.n+5 {
				t.Fatalf("round %d, %v: the replay's %d decisions and the batch: %v, %v", round, a, b.n, want, err)
			}
			b.answer(want[2*b.n].ToArray())
			for i := range b.n {
				e := &b.entries[i]
				w, err := want[2*i].ToArray()
				if err != nil {
					t.Fatalf("round %d, %v, decision %d alone: %v (%s)", round, a, i, err, strings.Join(b.argBuf[b.entries[i].arg0:b.entries[i].arg1], " "))
				}
				vals, _ := decodeMessages(w)
				if r, _ := result(vals); e.res != r || e.err != nil {
					t.Fatalf("round %d, %v, decision %d of %d: batched %+v, %v; alone %+v", round, a, i, b.n, e.res, e.err, r)
				}
			}
		}
	}
}

// singleScript is the text of the script at index a of algorithms, as the
// store loads it.
func singleScript(a sluice.Algorithm) string {
	return mustRead("prelude.lua") + "\n" + mustRead(scriptFile(a))
}

// agreeMode picks a mode the algorithm serves: "charge" only where ChargeN
// serves it.
func agreeMode(rng *rand.Rand, a sluice.Algorithm) string {
	modes := []string{"take", "take", "take", "refund", "peek", "charge"}
	m := modes[rng.IntN(len(modes))]
	if m == "charge" && a != sluice.TokenBucket && a != sluice.FixedWindow && a != sluice.SlidingWindow {
		return "take"
	}
	return m
}

func agreeStore(t *testing.T, url, prefix string, clock sluice.Clock) *Store {
	t.Helper()
	s, err := New(context.Background(), Config{URL: url, Prefix: prefix + ":" + t.Name() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)})
	if err != nil {
		t.Fatal(err)
	}
	s.clock = clock
	t.Cleanup(func() { s.Close() })
	return s
}

// A decision that fails in Redis fails alone: the others of its call are
// made and answered.
func TestBatchScriptIsolatesAFailedDecision(t *testing.T) {
	srv := redistest.Single(t)
	s := agreeStore(t, "redis://"+srv.Addr, "isolated", clocktest.New())
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: time.Second}
	key := func(k string) []string { return []string{s.prefix, ":fw:{", k, "}"} }
	srv.Do(t, "SET", strings.Join(key("wrongtype"), ""), "a string, not a hash")
	b := &batch{alg: sluice.FixedWindow}
	for _, k := range []string{"ok1", "wrongtype", "ok2"} {
		args, err := s.scriptArgs(nil, "take", lim, 1)
		if err != nil {
			t.Fatal(err)
		}
		b.stride = len(args)
		b.add(context.Background(), args, key(k))
	}
	b.prepare()
	callRedis(context.Background(), s.client, b)
	if e := b.entries[1]; e.err == nil || !strings.Contains(e.err.Error(), "WRONGTYPE") {
		t.Errorf("the decision on a string key: %+v, %v; want Redis's WRONGTYPE error", e.res, e.err)
	}
	for _, i := range []int{0, 2} {
		if e := b.entries[i]; e.err != nil || !e.res.Allowed || e.res.Remaining != 4 {
			t.Errorf("decision %d: %+v, %v; want admitted, 4 remaining", i, e.res, e.err)
		}
	}
}

// keySlot is the slot Redis Cluster itself gives each key, hash tags or
// not, braces in odd places included.
func TestKeySlotAgreesWithCluster(t *testing.T) {
	cl := redistest.SharedCluster(t)
	node := cl.MasterOf(t, "x")
	for _, key := range []string{"sluice:fw:{user}", "x", "{}", "a{b}c", "{{a}}", "a}b{c", "p:tb:{k}}", "☃{☃}", strings.Repeat("z", 4096)} {
		want := node.Do(t, "CLUSTER", "KEYSLOT", key)
		if got := keySlot([]string{key}); want != strconv.Itoa(int(got)) {
			t.Errorf("keySlot(%q) = %d, CLUSTER KEYSLOT says %s", key, got, want)
		}
	}
}
