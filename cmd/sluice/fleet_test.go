package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testlog"
)

// -local-share auto counts the fleet on Redis alone: with PostgreSQL or
// the memory store it is refused by name (exit 2), as is -fleet with
// neither it nor leases on Redis (which follow the fleet too) and a
// -local-share that is neither a number nor auto.
func TestLocalShareAutoIsRefusedWithoutRedis(t *testing.T) {
	listen := []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-store", "postgres://u:p@127.0.0.1:1/db", "-migrate=false", "-local-share", "auto"}, "PostgreSQL keeps no fleet membership"},
		{[]string{"-local-share", "auto"}, "-local-share auto: needs a Redis -store"},
		{[]string{"-store", "redis://127.0.0.1:1", "-lease-share", "0", "-fleet", "blue"}, "-fleet needs -local-share auto or leases"},
		{[]string{"-store", "redis://127.0.0.1:1", "-reserve-units", "4", "-fleet", "blue"}, "-fleet needs -local-share auto or leases"},
		{[]string{"-store", "postgres://u:p@127.0.0.1:1/db", "-migrate=false", "-lease-share", "0.01", "-fleet", "blue"}, "-fleet needs -local-share auto or leases"},
		{[]string{"-store", "redis://127.0.0.1:1", "-local-share", "most"}, `want a number of processes or "auto"`},
	} {
		runCase{append(append([]string{"serve"}, tt.args...), listen...), 2, "", tt.want}.check(t)
	}
}

// Two serve stores on one Redis with -local-share auto announce
// themselves in the fleet's key: the second counts both, so its local
// share is half of each limit (5 of 10 admitted before the store is
// asked for a sixth); the failure mode local follows the same count; and
// a store that closes leaves the fleet at once.
func TestServeLocalShareAutoFollowsTheFleetOnRedis(t *testing.T) {
	srv := redistest.Single(t)
	url := "redis://" + srv.Addr
	fleet := fmt.Sprintf("fleet-test-%d", time.Now().UnixNano())
	raw, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	members := func() int64 {
		n, _ := raw.Do(context.Background(), raw.B().Zcard().Key("sluice:fleet:{"+fleet+"}").Build()).AsInt64()
		return n
	}
	open := func() (closeStore func(), lim sluice.Limiter, count func() int, logs *testlog.Buffer) {
		t.Helper()
		s, code, done := parseServeFlags([]string{"-store", url, "-local-share", "auto", "-fleet", fleet, "-local-cache=false"}, &bytes.Buffer{}, &bytes.Buffer{})
		if done {
			t.Fatalf("parse: exit %d", code)
		}
		if err := s.o.remote.check(s.fs, &s.o); err != nil {
			t.Fatal(err)
		}
		logs = &testlog.Buffer{}
		st, err := openServeStore(context.Background(), &s.o, false, slog.New(slog.NewTextHandler(logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		p := findPolicy(t, st)
		if p.NodesNow == nil {
			t.Fatal("the failure mode's share does not follow the fleet (NodesNow unset)")
		}
		return st.Close, st.Limiter, s.o.remote.fleetCount, logs
	}

	closeA, _, _, logsA := open()
	eventually(t, "the first process has announced itself", func() bool { return members() == 1 })
	if !strings.Contains(logsA.String(), `failure_nodes="the fleet's live count"`) {
		t.Errorf("the start-up lines do not say the failure mode's share follows the fleet:\n%s", logsA.String())
	}
	closeB, limB, countB, _ := open()
	defer closeB()
	eventually(t, "the second process counts two", func() bool { return countB() == 2 })

	ten := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 10, Period: time.Hour}
	key := fmt.Sprintf("fleet-share-%d", time.Now().UnixNano())
	admitted := 0
	for range 10 {
		r, err := limB.AllowN(context.Background(), key, ten, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Errorf("the second of two processes admitted %d of a limit of 10, want its share, 5", admitted)
	}

	closeA()
	if n := members(); n != 1 {
		t.Errorf("after the first process closed its store the fleet has %d members, want 1 (it leaves at once)", n)
	}
}

// With leases on Redis (the default) and no -failure-nodes nor a fixed
// -local-share, the fleet is counted anyway, so the failure mode local
// divides each limit by the same count (docs/serve.md says so): before,
// only -local-share auto did, and with leases alone each process admitted
// the whole limit while Redis failed.
func TestServeFailureModeLocalFollowsTheFleetWithLeases(t *testing.T) {
	srv := redistest.Single(t)
	for _, tt := range []struct {
		args   []string
		follow bool
	}{
		{nil, true},
		{[]string{"-failure-nodes", "3"}, false},
		{[]string{"-local-share", "4"}, false},
		{[]string{"-lease-share", "0"}, false},
	} {
		args := append([]string{"-store", "redis://" + srv.Addr, "-failure-mode", "local", "-fleet", fmt.Sprintf("f-%d", time.Now().UnixNano())}, tt.args...)
		if len(tt.args) > 0 && tt.args[0] == "-lease-share" {
			args = append([]string{"-store", "redis://" + srv.Addr, "-failure-mode", "local"}, tt.args...)
		}
		s, code, done := parseServeFlags(args, &bytes.Buffer{}, &bytes.Buffer{})
		if done {
			t.Fatalf("%v: parse: exit %d", args, code)
		}
		if err := s.o.remote.check(s.fs, &s.o); err != nil {
			t.Fatal(err)
		}
		var logs testlog.Buffer
		st, err := openServeStore(context.Background(), &s.o, true, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if got := findPolicy(t, st).NodesNow != nil; got != tt.follow {
			t.Errorf("%v: the failure mode's share follows the fleet: %v, want %v\n%s", tt.args, got, tt.follow, logs.String())
		}
		st.Close()
	}
}

// Shutdown leaves the fleet in Release, within the shutdown's deadline,
// after the leases' units go back, not in Close after it: the member is
// gone from the fleet's set once Release has returned. Before, the leave
// ran in Close on its own 1 s timeout, past the deadline (with Redis
// stopped, a Shutdown given 100 ms took 2 s).
func TestServeShutdownLeavesTheFleetWithinItsDeadline(t *testing.T) {
	srv := redistest.Single(t)
	fleet := fmt.Sprintf("f-%d", time.Now().UnixNano())
	s, code, done := parseServeFlags([]string{"-store", "redis://" + srv.Addr, "-fleet", fleet}, &bytes.Buffer{}, &bytes.Buffer{})
	if done {
		t.Fatalf("parse: exit %d", code)
	}
	if err := s.o.remote.check(s.fs, &s.o); err != nil {
		t.Fatal(err)
	}
	st, err := openServeStore(context.Background(), &s.o, false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eventually(t, "the process has counted itself", func() bool { return s.o.remote.leaseCount() == 1 })
	members := func() string { return srv.Do(t, "ZCARD", "sluice:fleet:{"+fleet+"}") }
	if got := members(); got != "1" {
		t.Fatalf("the fleet's set holds %s members, want 1", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st.Release(ctx)
	if got := members(); got != "0" {
		t.Errorf("after Release the fleet's set holds %s members, want 0 (left within the shutdown's deadline)", got)
	}
}
