package redisstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// seedLimits are the two layouts that seed each other's keys: the
// two-window counter and the sliding window with moments.
var seedLimits = []sluice.Limit{
	{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Hour},
	{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Hour, Buckets: 16, Moments: 2},
}

// A caller key that starts with '}' (an empty hash tag: the whole key is
// hashed), or a prefix with braces of its own, gives the two layouts'
// keys of one caller key a slot each on a Cluster. Such a key is decided
// on its own key alone, unseeded, rather than refused (CROSSSLOT) or
// rejected by rueidis before it is sent, which in the coalesced mode
// panicked in the batch's goroutine: a client could end the process.
func TestKeyWithoutItsOwnHashTagIsDecidedOnClusterUnseeded(t *testing.T) {
	cl := redistest.SharedCluster(t)
	url := "redis+cluster://" + strings.Join(cl.Addrs, ",")
	ctx := context.Background()
	run := uniqueRun() // the shared Cluster keeps the keys of earlier runs
	n := 0
	for _, prefix := range []string{"evil", "app{", "x{}"} {
		for _, key := range []string{"}evil", "}", "k"} {
			if prefix == "evil" && key == "k" {
				continue // hashes alike: seeded, tested elsewhere
			}
			for _, wait := range []time.Duration{0, time.Millisecond} {
				for _, lim := range seedLimits {
					n++
					pfx := prefix + run + strconv.Itoa(n)
					s, err := New(ctx, Config{URL: url, Prefix: pfx, CoalesceWait: wait})
					if err != nil {
						t.Fatal(err)
					}
					// 30 decisions at once, so that coalesced ones go in
					// batches: 10 admitted, whatever the order.
					var wg sync.WaitGroup
					var mu sync.Mutex
					admitted, failed := 0, 0
					var firstErr error
					for range 30 {
						wg.Go(func() {
							r, err := s.Allow(ctx, key, lim)
							mu.Lock()
							defer mu.Unlock()
							switch {
							case err != nil:
								failed++
								firstErr = err
							case r.Allowed:
								admitted++
							}
						})
					}
					wg.Wait()
					s.Close()
					if failed > 0 || admitted != 10 {
						t.Errorf("prefix %q key %q, coalescing %v, %v: %d admitted of 30, %d failed (%v); want 10 admitted, none failed",
							prefix, key, wait, lim, admitted, failed, firstErr)
					}
				}
			}
		}
	}
}

// seedKind sends the predecessor's key exactly when both keys hash to one
// slot, as Redis Cluster computes it, whatever the prefix and key.
func TestSeedKindOnlyWhenBothKeysShareASlot(t *testing.T) {
	cl := redistest.SharedCluster(t)
	node := cl.MasterOf(t, "x")
	for _, c := range []struct {
		prefix, key string
		seeded      bool
	}{
		{"sluice", "user:1", true}, {"{t}", "k", true}, {"sluice", "a}b", true}, {"sluice", "", false},
		{"sluice", "}x", false}, {"sluice", "}", false}, {"app{", "k", false}, {"x{}", "k", false},
	} {
		s := &Store{prefix: c.prefix}
		parts := s.keyParts("sw", c.key)
		got := seedKind("swm", parts[:]) == "swm"
		same := node.Do(t, "CLUSTER", "KEYSLOT", s.key("sw", c.key)) == node.Do(t, "CLUSTER", "KEYSLOT", s.key("swm", c.key))
		if got != c.seeded || got != same {
			t.Errorf("prefix %q key %q: seeded %v, want %v (Cluster: same slot %v)", c.prefix, c.key, got, c.seeded, same)
		}
	}
}

// While a Cluster migrates a slot, a call on a key and its predecessor's
// key of which the old node holds one and not the other is refused
// (TRYAGAIN) by the old node, and after ASK by the new one, for as long
// as the migration lasts. The decision is then made again on its own key
// alone, where that key is: alone, coalesced (refused as a batch, then
// each alone), with the key present on the old node or absent.
func TestSeededDecisionDuringSlotMigrationDecidesOnItsOwnKey(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	s, err := New(ctx, Config{URL: "redis+cluster://" + strings.Join(cl.Addrs, ","), Prefix: "mig"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// One hash tag, "a": one slot. Each key is decided once before the
	// migration, under each layout: present is present on the old node
	// (its predecessor's key too for the counter, which keeps the moments
	// key), absent is not.
	present, absent := "a}1", "a}2"
	src := cl.MasterOf(t, s.key("sw", "a"))
	var dst *redistest.Server
	for _, n := range cl.Nodes {
		if n != src {
			dst = n
			break
		}
	}
	// The key of present under moments exists; the counter's does not.
	lim := seedLimits[1]
	if _, err := s.Allow(ctx, present, lim); err != nil {
		t.Fatal(err)
	}
	slot := strconv.Itoa(int(keySlot([]string{s.key("swm", present)})))
	dst.Do(t, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.Do(t, "CLUSTER", "MYID"))
	src.Do(t, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.Do(t, "CLUSTER", "MYID"))

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Alone (no coalescing).
	for _, c := range []struct {
		key  string
		lim  sluice.Limit
		want int
	}{
		{present, seedLimits[1], 8}, // its second unit, on the old node
		{absent, seedLimits[1], 9},  // fresh, on the new node
		{absent, seedLimits[0], 9},  // the counter, fresh, on the new node
	} {
		r, err := s.Allow(cctx, c.key, c.lim)
		if err != nil || !r.Allowed || r.Remaining != c.want {
			t.Errorf("alone, key %q under %v during the migration: %+v, %v; want admitted with %d left", c.key, c.lim, r, err, c.want)
		}
	}
	// Coalesced: a batch of the moments script on both keys, refused
	// whole, then each decision alone.
	b := &batch{alg: momentsScript}
	for _, k := range []string{present, absent} {
		args, err := s.scriptArgs(nil, "take", lim, 1)
		if err != nil {
			t.Fatal(err)
		}
		b.stride = len(args)
		parts := s.keyParts("swm", k)
		b.add(cctx, args, parts[:])
	}
	b.prepare()
	callRedis(cctx, s.client, b)
	for i, want := range []int{7, 8} {
		if e := b.entries[i]; e.err != nil || !e.res.Allowed || e.res.Remaining != want {
			t.Errorf("decision %d of the batch during the migration: %+v, %v; want admitted with %d left", i, e.res, e.err, want)
		}
	}
}

// Without a Cluster every key is in one lane per algorithm, yet a
// decision that is seeded has two keys and one that is not has one: they
// go in batches of their own, so that each batch's decisions have as many
// keys each (batch.lua), and both kinds are decided right side by side.
func TestSeededAndUnseededDecisionsCoalesceApart(t *testing.T) {
	url := "redis://" + redistest.Single(t).Addr
	ctx := context.Background()
	run := uniqueRun() // the shared server keeps the keys of earlier runs
	for i, lim := range seedLimits {
		s, err := New(ctx, Config{URL: url, Prefix: "apart" + run + strconv.Itoa(i), CoalesceWait: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"}evil", "k"}
		var mu sync.Mutex
		admitted := map[string]int{}
		var wg sync.WaitGroup
		for j := range 60 {
			key := keys[j%2]
			wg.Go(func() {
				r, err := s.Allow(ctx, key, lim)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("key %q under %v: %v", key, lim, err)
				} else if r.Allowed {
					admitted[key]++
				}
			})
		}
		wg.Wait()
		s.Close()
		for _, k := range keys {
			if admitted[k] != 10 {
				t.Errorf("key %q under %v: %d admitted of 30, want 10", k, lim, admitted[k])
			}
		}
	}
}

// uniqueRun returns a prefix part no earlier run of a test (-count) used.
func uniqueRun() string {
	return strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
}
