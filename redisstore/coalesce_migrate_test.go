package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// While a Cluster migrates a slot, a batch whose keys are some still on
// the slot's old node and some not is refused whole by Redis (TRYAGAIN,
// nothing run): its decisions are then each made alone, where its key is
// (ASK), as they would be without coalescing, rather than all failing
// for as long as the migration lasts.
func TestBatchDuringSlotMigrationDecidesEachWhereItsKeyIs(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	s, err := New(ctx, Config{URL: "redis+cluster://" + strings.Join(cl.Addrs, ","), Prefix: "mig"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Hour}
	present, absent := "a}1", "a}2" // both of hash tag "a": one slot
	if _, err := s.Allow(ctx, present, lim); err != nil {
		t.Fatal(err)
	}
	src := cl.MasterOf(t, s.Key(sluice.FixedWindow, present))
	var dst *redistest.Server
	for _, n := range cl.Nodes {
		if n != src {
			dst = n
			break
		}
	}
	slot := strconv.Itoa(int(keySlot([]string{s.Key(sluice.FixedWindow, present)})))
	dst.Do(t, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.Do(t, "CLUSTER", "MYID"))
	src.Do(t, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.Do(t, "CLUSTER", "MYID"))

	b := &batch{alg: sluice.FixedWindow}
	for _, k := range []string{present, absent} {
		args, err := s.scriptArgs(nil, "take", lim, 1)
		if err != nil {
			t.Fatal(err)
		}
		b.stride = len(args)
		b.add(ctx, args, []string{s.Key(sluice.FixedWindow, k)})
	}
	b.prepare()
	callRedis(ctx, s.client, b)
	for i, want := range []int{8, 9} { // present: its second unit
		if e := b.entries[i]; e.err != nil || !e.res.Allowed || e.res.Remaining != want {
			t.Errorf("decision %d of the batch during the migration: %+v, %v; want admitted with %d left", i, e.res, e.err, want)
		}
	}
}
