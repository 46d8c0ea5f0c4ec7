package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/relief"
)

// defaultFleet is -fleet's default: the fleet of serve processes on one
// Redis whose operator named none.
const defaultFleet = "serve"

// shareFlag is -local-share's value: a number of processes N, or "auto"
// (the live count of the fleet, relief.Fleet).
type shareFlag struct{ r *remoteOptions }

func (f shareFlag) String() string {
	switch {
	case f.r == nil:
		return "0"
	case f.r.localShareAuto:
		return "auto"
	}
	return strconv.Itoa(f.r.localShare)
}

func (f shareFlag) Set(s string) error {
	if s == "auto" {
		f.r.localShare, f.r.localShareAuto = 0, true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New(`want a number of processes or "auto"`)
	}
	f.r.localShare, f.r.localShareAuto = n, false
	return nil
}

// checkFleet refuses -local-share auto without a store that keeps a
// fleet's membership (Redis), and -fleet with neither -local-share auto
// nor leases on Redis. r.leaseShare is as check leaves it.
func (r *remoteOptions) checkFleet(set map[string]bool, kind *stores.Kind) error {
	counted := r.countsFleet(kind)
	switch {
	case set["fleet"] && !counted:
		return errors.New("-fleet needs -local-share auto or leases on a Redis -store (-lease-share)")
	case !counted:
		return nil
	case r.fleet == "" || len(r.fleet) > maxFleetName:
		return fmt.Errorf("-fleet (or SLUICE_FLEET) %q: want 1 to %d bytes", r.fleet, maxFleetName)
	case !r.localShareAuto:
		return nil
	case kind != stores.Redis:
		return fmt.Errorf("-local-share auto: needs a Redis -store, where the processes announce themselves; %s keeps no fleet membership: give -local-share N", kind.Name)
	}
	return nil
}

// countsFleet reports whether serve counts the fleet's live processes on
// a store of kind: for -local-share auto, or for leases on Redis.
// r.leaseShare is as check leaves it.
func (r *remoteOptions) countsFleet(kind *stores.Kind) bool {
	return r.localShareAuto || r.leaseShare > 0 && kind == stores.Redis
}

// maxFleetName is the longest -fleet, as redisstore.Roster takes it.
const maxFleetName = 256

// startFleet, with -local-share auto or leases on Redis, starts counting
// the fleet's live processes on st's store (relief.Fleet: an announce
// every second, a member counted 5 s after its last) and makes st's Close
// leave the fleet before the store closes. With -local-share auto the
// count is the divisor of the local share (shareOf); unless -failure-nodes
// or a fixed -local-share N sets it, of the failure mode local's share
// too; with leases, its fresh count divides each lease's share
// (leaseCount).
func (r *remoteOptions) startFleet(st *stores.Opened, failureNodes int, log *slog.Logger) error {
	leases := r.leaseShare > 0 && st.Roster != nil
	if !r.localShareAuto && !leases {
		return nil
	}
	if st.Roster == nil {
		return errors.New("-local-share auto: the store keeps no fleet membership")
	}
	log = log.With("fleet", r.fleet)
	f, err := relief.NewFleet(relief.FleetConfig{Roster: st.Roster(r.fleet), Max: stores.MaxFailureNodes, Logger: log})
	if err != nil {
		return err
	}
	attrs := []any{"member", f.ID(), "announce_every", relief.DefaultFleetPeriod, "member_ttl", relief.DefaultFleetTTL}
	if r.localShareAuto {
		r.fleetCount = f.Count
		attrs = append(attrs, "local_share", "follows the fleet")
	}
	// The failure mode local's share follows the count too, unless
	// -failure-nodes or a fixed -local-share N set it.
	follow := failureNodes == 0 && r.localShare == 0
	if st.Failure != nil && follow {
		st.Failure.NodesNow = f.Count
	}
	attrs = append(attrs, "failure_mode_share", map[bool]string{true: "follows the fleet", false: "-failure-nodes or -local-share"}[follow])
	if leases {
		// A lease's units are held up to -reserve-hold: none is taken
		// within a hold of the others forgetting this process (for holds
		// up to half the member TTL; a longer hold keeps leasing until
		// then, and its last part is not covered while announcing fails).
		hold := min(r.reserveHold, relief.DefaultFleetTTL/2)
		r.leaseCount = func() int { return f.FreshFor(hold) }
		attrs = append(attrs, "lease_share", "divided by the fleet's count; no lease until counted")
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	// Shutdown leaves the fleet in Release, within its deadline: a leave
	// that a Redis not answering holds is cut there (the others then count
	// this process until its TTL passes), and Close does not wait for it
	// again. Close alone (no Shutdown) waits for the leave, which Run
	// bounds by its Timeout.
	var released atomic.Bool
	release := st.Release
	st.Release = func(ctx context.Context) {
		if release != nil {
			release(ctx)
		}
		released.Store(true)
		stop()
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	closeStore := st.Close
	st.Close = func() {
		stop()
		if !released.Load() {
			<-done
		}
		closeStore()
	}
	log.Info("counting the fleet's live processes", attrs...)
	return nil
}

// shareOf returns the local share of a limit: -local-share N's, or, with
// -local-share auto once startFleet has run, the limit split by the live
// processes last counted.
func (r *remoteOptions) shareOf() func(sluice.Limit) sluice.Limit {
	if count := r.fleetCount; count != nil {
		return func(l sluice.Limit) sluice.Limit { return failsafe.Split(l, count()) }
	}
	return localShare(r.localShare)
}
