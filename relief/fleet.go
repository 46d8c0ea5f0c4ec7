package relief

// A Fleet counts the processes that share a store, so that each can take
// its share of a split limit (Hybrid's, and the failure mode local's) from
// the live count rather than from a number fixed at start. One goroutine,
// Run, announces this process on the Roster every Period with a time to
// live TTL and stores the count it gets back; Count reads it with one
// atomic load, so the hot path never waits on the store. The count a
// process uses is the one its last announce returned: a join is seen by
// each other process at its next announce (within Period), a process that
// leaves (Run's context ends) is gone from the store at once and seen
// within Period, and one that crashes is counted until its TTL has passed,
// then within Period. While the store fails the count stays as it was.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Roster is a fleet's membership set in a shared store, such as
// redisstore.Roster.
type Roster interface {
	// Announce records id as a live member for ttl and returns how many
	// members are live, id among them, counting at most most.
	Announce(ctx context.Context, id string, ttl time.Duration, most int) (int, error)
	// Leave removes id from the live members.
	Leave(ctx context.Context, id string) error
}

// A Roster may also say the longest time to live its Announce takes, so
// that NewFleet refuses a FleetConfig.TTL it would refuse at every announce.
type rosterTTL interface{ MaxTTL() time.Duration }

// The defaults of FleetConfig.
const (
	// DefaultFleetPeriod is how often a Fleet announces itself and counts.
	DefaultFleetPeriod = time.Second
	// DefaultFleetTTL is how long a member that stops announcing (a
	// crashed process) is still counted.
	DefaultFleetTTL = 5 * time.Second
	// DefaultFleetMax is the most members a Fleet counts: a share of a
	// limit divided by more would round to the same least share.
	DefaultFleetMax = 10_000
)

// FleetConfig configures a Fleet. Only Roster is required; every other
// zero field has the default its comment gives.
type FleetConfig struct {
	// Roster is where the members announce themselves.
	Roster Roster
	// ID is this process's member id, unique in the fleet. Default: the
	// host name, the process id and 8 random bytes in hex.
	ID string
	// Period is how often Run announces and counts. Default
	// DefaultFleetPeriod.
	Period time.Duration
	// TTL is how long the store counts this process after its last
	// announce; at least 2 × Period, and at most what the Roster takes when
	// it says (a MaxTTL method, as redisstore.Roster has). Default
	// DefaultFleetTTL.
	TTL time.Duration
	// Max is the most members counted (the Roster caps the count).
	// Default DefaultFleetMax.
	Max int
	// Initial is the count before the first announce has answered. Default
	// 1.
	Initial int
	// Timeout bounds each announce, and the leave when Run returns.
	// Default Period.
	Timeout time.Duration
	// Tick makes Run's ticker; nil uses time.NewTicker. Tests give one that
	// fires when they say.
	Tick func(d time.Duration) (c <-chan time.Time, stop func())
	// Logger receives a line when the count changes and when announcing
	// starts and stops failing. Default slog.Default().
	Logger *slog.Logger
	// Clock tells the time Fresh goes by; nil means the system clock.
	Clock sluice.Clock
}

// Fleet is this process's view of how many processes share the store. It
// is safe for concurrent use; Count may be called before Run.
type Fleet struct {
	cfg   FleetConfig
	count atomic.Int64
	// sent is when (on cfg.Clock, with the system clock's monotonic
	// reading) the last announce that answered was sent; nil before the
	// first and once Run has left.
	sent  atomic.Pointer[time.Time]
	fails int // consecutive failed announces; only one goroutine at a time calls Beat
}

// NewFleet returns the Fleet of cfg, counting cfg.Initial until Run (or
// Beat) has announced once.
func NewFleet(cfg FleetConfig) (*Fleet, error) {
	if cfg.Roster == nil {
		return nil, errors.New("relief: FleetConfig.Roster is nil")
	}
	cfg.Period = cmp.Or(cfg.Period, DefaultFleetPeriod)
	cfg.TTL = cmp.Or(cfg.TTL, DefaultFleetTTL)
	cfg.Max = cmp.Or(cfg.Max, DefaultFleetMax)
	cfg.Initial = cmp.Or(cfg.Initial, 1)
	switch {
	case cfg.Period < 0:
		return nil, fmt.Errorf("relief: FleetConfig.Period %v is negative", cfg.Period)
	case cfg.TTL < 2*cfg.Period:
		return nil, fmt.Errorf("relief: FleetConfig.TTL %v is under twice the Period %v: a member would drop out between two announces", cfg.TTL, cfg.Period)
	case cfg.Max < 1:
		return nil, fmt.Errorf("relief: FleetConfig.Max %d: want at least 1", cfg.Max)
	case cfg.Initial < 1 || cfg.Initial > cfg.Max:
		return nil, fmt.Errorf("relief: FleetConfig.Initial %d: want 1 to Max (%d)", cfg.Initial, cfg.Max)
	}
	if r, ok := cfg.Roster.(rosterTTL); ok && cfg.TTL > r.MaxTTL() {
		return nil, fmt.Errorf("relief: FleetConfig.TTL %v is over the %v the Roster takes", cfg.TTL, r.MaxTTL())
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = cfg.Period
	}
	if cfg.ID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("relief: fleet member id: %w", err)
		}
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.Tick == nil {
		cfg.Tick = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = sluice.SystemClock{}
	}
	f := &Fleet{cfg: cfg}
	f.count.Store(int64(cfg.Initial))
	return f, nil
}

// ID returns this process's member id.
func (f *Fleet) ID() string { return f.cfg.ID }

// Count returns the live members this process last counted, itself among
// them: at least 1 and at most FleetConfig.Max; FleetConfig.Initial before
// the first announce has answered.
func (f *Fleet) Count() int { return int(f.count.Load()) }

// Fresh returns Count while the store still counts this process: from the
// first announce that answered until TTL after the last one that answered
// was sent (the store keeps the member at least that long, on a clock that
// runs at the rate of this one); else 0, as before the first announce has
// answered, once announcing has failed for a TTL, and once Run has left
// the fleet. A caller that divides a share of a limit by Fresh and takes
// none while it is 0 takes a share only while the others count this
// process (as soon as each has announced since it joined).
func (f *Fleet) Fresh() int { return f.FreshFor(0) }

// FreshFor is Fresh ending hold earlier: 0 from TTL − hold after the last
// answered announce was sent. A caller that holds what it takes with the
// count for up to hold (relief.Batcher's leases, for BatchConfig.Hold)
// divides by FreshFor(hold), so that what it holds is spent or returned
// before the others stop counting this process and take its part. A hold
// of TTL or more makes it 0 always (keep hold well under the TTL). It is 0
// too while the clock reads before the last answered announce (a clock
// stepped back), until an announce answers again.
func (f *Fleet) FreshFor(hold time.Duration) int {
	sent := f.sent.Load()
	if sent == nil {
		return 0
	}
	// A clock that stepped back (elapsed < 0: a fake or wall clock; the
	// system clock's monotonic reading does not step) says nothing of how
	// long ago that was: none until an announce answers again.
	if elapsed := f.cfg.Clock.Now().Sub(*sent); elapsed < 0 || elapsed >= f.cfg.TTL-hold {
		return 0
	}
	return f.Count()
}

// Beat announces this process once and, when the store answers, makes its
// count the one Count returns; on an error the count stays as it was. Run
// calls it every Period; a caller that does not use Run (a test, to decide
// exactly when each process counts) may call it itself, from one goroutine
// at a time.
func (f *Fleet) Beat(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	sent := f.cfg.Clock.Now()
	n, err := f.cfg.Roster.Announce(actx, f.cfg.ID, f.cfg.TTL, f.cfg.Max)
	if err != nil {
		if ctx.Err() == nil { // not counted when the caller stopped it
			f.fails++
		}
		// Logged once per run of failures, at the second: the first
		// announce of a process whose store is still connecting fails.
		if f.fails == 2 {
			f.cfg.Logger.Warn("fleet: announcing failed; each share stays as sized until the store answers",
				"count", f.Count(), "err", err)
		}
		return fmt.Errorf("relief: fleet announce: %w", err)
	}
	if f.fails >= 2 {
		f.cfg.Logger.Info("fleet: announcing again")
	}
	f.fails = 0
	n = min(max(n, 1), f.cfg.Max)
	old := f.count.Swap(int64(n))
	f.sent.Store(&sent)
	if old != int64(n) {
		f.cfg.Logger.Info("fleet: live processes counted", "count", n, "was", old)
	}
	return nil
}

// Run announces this process at once and then every Period until ctx
// ends, then leaves the fleet (within Timeout, on a context apart from
// ctx), so that the others count one fewer at their next announce. Its
// errors are Beat's, logged; it returns when it has left.
func (f *Fleet) Run(ctx context.Context) {
	tick, stop := f.cfg.Tick(f.cfg.Period)
	defer stop()
	for {
		_ = f.Beat(ctx) // a failure is logged once and keeps the count
		select {
		case <-ctx.Done():
			f.sent.Store(nil) // Fresh: no longer counted by the others
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.Timeout)
			if err := f.cfg.Roster.Leave(lctx, f.cfg.ID); err != nil {
				f.cfg.Logger.Warn("fleet: leaving failed; the others count this process until its TTL passes",
					"ttl", f.cfg.TTL, "err", err)
			}
			cancel()
			return
		case <-tick:
		}
	}
}
