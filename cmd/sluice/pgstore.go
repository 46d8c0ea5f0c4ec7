package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/service"
)

// remoteOptions are serve's settings of a remote store beyond -store:
// PostgreSQL's migrations on start (-migrate), and the reservations and
// local share in front of Redis or PostgreSQL (see reserve.go and
// relief.Batcher.ReleaseAndLog).
type remoteOptions struct {
	migrate bool // -migrate: apply pgstore's migrations on start
	// maxKeys is -max-keys-per-group: pgstore.Config.MaxKeysPerGroup, 0
	// for no bound (pgstore's -1).
	maxKeys int64

	reserveUnits int           // -reserve-units: relief.BatchConfig.Batch; 0 is off
	reserveHold  time.Duration // -reserve-hold: relief.BatchConfig.Hold
	localShare   int           // -local-share: 1/N of each limit decided locally first; 0 is off
	// localShareAuto is -local-share auto: N is the live count of the
	// fleet (fleet.go); fleet is -fleet, its name, and fleetCount its
	// count once startFleet has run; leaseCount, with leases on Redis,
	// the count the leases divide their share by (relief.Fleet.Fresh).
	localShareAuto bool
	fleet          string
	fleetCount     func() int
	leaseCount     func() int
	// leaseShare is -lease-share, relief.BatchConfig.LeaseShare, as check
	// leaves it: 0 (off) with PostgreSQL unless given, and with
	// -reserve-units.
	leaseShare float64

	// timeout is -store-timeout: the deadline of one decision on the
	// store (see stores.WithTimeout); 0 keeps the store's default.
	timeout time.Duration
}

// defaultLeaseShare is -lease-share's default with Redis: a process leases
// at most 1% of a limit at a time (see docs/serve.md for the bound).
const defaultLeaseShare = 0.01

// flags defines -migrate, -max-keys-per-group, -reserve-units, -reserve-hold, -lease-share,
// -local-share and -store-timeout on fs.
func (r *remoteOptions) flags(fs *flag.FlagSet) {
	fs.BoolVar(&r.migrate, "migrate", true,
		"with PostgreSQL, apply the schema's migrations on start (the database must then be reachable to start); -migrate=false starts without connecting, the schema brought up to date beforehand by sluice migrate")
	fs.Int64Var(&r.maxKeys, "max-keys-per-group", pgstore.DefaultMaxKeysPerGroup,
		"with PostgreSQL, at most this many distinct keys per group (a store key without its last value) and period: a new key past it is refused as a bad request and writes nothing; 0: no bound (clients then choose how many rows a period holds)")
	fs.IntVar(&r.reserveUnits, "reserve-units", 0,
		"with Redis or PostgreSQL, reserve a key's units B at a time and spend them in this process without a round trip: the process holds at most B-1 unspent units per key, for at most -reserve-hold, refunded at shutdown; 0: off")
	fs.DurationVar(&r.reserveHold, "reserve-hold", 100*time.Millisecond,
		"with -reserve-units or -lease-share, how long a reservation's unspent units are held before they go back; a lease is sized from a key's use in this long")
	fs.Float64Var(&r.leaseShare, "lease-share", defaultLeaseShare,
		"with Redis (or PostgreSQL when given), lease each busy key's units in one round trip and spend them in this process: a lease is the units the process asked of the key in the last -reserve-hold, at most this share of the limit divided by the live processes of -fleet (counted every second; no lease until counted; with PostgreSQL, not divided), and none (an exact decision) when that is under 2 units; the fleet holds under share x limit unspent units per key in total, refunded at shutdown; 0: off")
	fs.Var(shareFlag{r}, "local-share",
		"with Redis or PostgreSQL, N: a request must first pass 1/N of its limit (rounded down, at least 1, as -failure-nodes divides it) counted in this process, so a burst past one process's share never reaches the store; set N to the number of processes or fewer; auto (Redis): N is the live count of -fleet's processes, each announcing itself every second; 0: off")
	fs.StringVar(&r.fleet, "fleet", envflag.String("SLUICE_FLEET", defaultFleet),
		"with -local-share auto or leases on Redis, the name of the fleet whose live processes share each limit and each lease share (the Redis key <prefix>:fleet:{NAME}); deployments that share one Redis but not their limits take different names")
	stores.TimeoutFlag(fs, &r.timeout, "Redis or PostgreSQL", "250ms on Redis and on PostgreSQL")
}

// check refuses settings that cannot act with -store store (exit 2): a
// -store-timeout out of its range, -migrate=false, reservations or a local share without a remote store,
// Redis's key format and per-second store with PostgreSQL.
func (r *remoteOptions) check(fs *flag.FlagSet, o *serveOptions) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := stores.CheckTimeout(r.timeout); err != nil {
		return err
	}
	if err := stores.CheckFailureNodes(o.failureNodes); err != nil {
		return err
	}
	switch {
	case r.maxKeys < 0:
		return fmt.Errorf("-max-keys-per-group %d: want 0 (no bound) or more", r.maxKeys)
	case r.reserveUnits < 0 || r.reserveUnits == 1:
		return fmt.Errorf("-reserve-units %d: want 0 (off) or at least 2 (a reservation of 1 is no batch)", r.reserveUnits)
	case r.reserveHold <= 0:
		return fmt.Errorf("-reserve-hold %v: want a positive duration", r.reserveHold)
	case r.localShare < 0:
		return fmt.Errorf("-local-share %d: want 0 (off) or at least 1", r.localShare)
	case !(r.leaseShare >= 0 && r.leaseShare <= 1): // NaN too
		return fmt.Errorf("-lease-share %v: want 0 (off) to 1", r.leaseShare)
	case set["lease-share"] && r.leaseShare > 0 && r.reserveUnits > 0:
		return errors.New("-lease-share and -reserve-units: choose one (a lease is sized per key, a reservation is B units)")
	}
	kind, err := stores.Of(o.store)
	if err != nil {
		return err
	}
	if r.reserveUnits > 0 || (kind == stores.Postgres && !set["lease-share"]) {
		r.leaseShare = 0 // batches, or PostgreSQL's exact quotas
	}
	if err := r.checkFleet(set, kind); err != nil {
		return err
	}
	if set["reserve-hold"] && (r.reserveUnits == 0 && (r.leaseShare == 0 || !kind.Remote)) {
		return errors.New("-reserve-hold needs -reserve-units or -lease-share")
	}
	if !kind.Remote && (r.reserveUnits > 0 || r.localShare > 0) {
		return errors.New("-reserve-units and -local-share need a remote store (-store redis://… or postgres://…): the memory store is already local")
	}
	if kind != stores.Postgres {
		if set["migrate"] {
			return errors.New("-migrate: only a PostgreSQL -store (postgres://…) has migrations")
		}
		if set["max-keys-per-group"] {
			return errors.New("-max-keys-per-group: only a PostgreSQL -store (postgres://…) keeps a row per key")
		}
		return nil
	}
	if o.redis.PerSecond != "" {
		return errors.New("-store-per-second (REDIS_PERSECOND): needs a Redis -store, not PostgreSQL")
	}
	if o.redis.ServiceKeyFormat() == service.KeyEnvoy {
		return errors.New("-redis-key-format envoy: PostgreSQL has no Redis keys")
	}
	return nil
}

// validator returns the check of the limits serve's store serves (see
// checkRulesForStore): the store's (stores.Validator, which check uses too);
// with -local-share, the local share of the limit must be one as well.
func (o *serveOptions) validator() func(sluice.Limit) error {
	v := stores.Validator(o.store)
	n := o.remote.localShare
	if o.remote.localShareAuto {
		n = stores.MaxFailureNodes // the smallest share the fleet's count may give
	}
	if n <= 0 || v == nil {
		return v
	}
	share := localShare(n)
	return func(lim sluice.Limit) error {
		if err := v(lim); err != nil {
			return err
		}
		if err := share(lim).Validate(); err != nil {
			return fmt.Errorf("-local-share %s: the local share %w", shareFlag{&o.remote}, err)
		}
		return nil
	}
}

// storeNotActedOn returns the store's environment variables that serve
// does not act on: with PostgreSQL, every Redis variable set (REDIS_URL
// too: -store names the database); else stores.RedisOptions.notActedOn's.
func (o *serveOptions) storeNotActedOn() []string {
	if !stores.Is(o.store, stores.Postgres) {
		return o.redis.NotActedOn(o.store)
	}
	var out []string
	for _, kv := range os.Environ() {
		name, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "REDIS_") && v != "" {
			out = append(out, name+" (the store is PostgreSQL)")
		}
	}
	return out
}

// openServeStore opens serve's store: PostgreSQL (stores.OpenPostgres) or what
// stores.Open opens, then puts the reservations, the local share and the
// over-limit cache (-local-cache) in front of it, in that order from the
// store out (see wrapRemote), its failure policy's deadline set by
// -store-timeout. failureSet says whether the operator set -failure-mode.
func openServeStore(ctx context.Context, o *serveOptions, failureSet bool, log *slog.Logger) (stores.Opened, error) {
	var st stores.Opened
	var err error
	mem := memstore.Config{MaxBytes: o.memMaxBytes, ClockResolution: o.memClock}
	if stores.Is(o.store, stores.Postgres) {
		maxKeys := o.remote.maxKeys
		if maxKeys == 0 {
			maxKeys = -1 // pgstore's "no bound"
		}
		st, err = stores.OpenPostgres(ctx, o.store, o.failure, failureSet, o.remote.migrate, maxKeys, mem, log)
	} else {
		st, err = stores.Open(ctx, o.store, &o.redis, o.failure, mem, log)
	}
	if err != nil || st.Mem != nil {
		return st, err // the memory store is local already (mootFlags names -local-cache)
	}
	stores.WithTimeout(st.Failure, o.remote.timeout)
	stores.WithFailureNodes(st.Failure, o.failureNodes, o.remote.localShare)
	if err := o.remote.startFleet(&st, o.failureNodes, log); err != nil {
		st.Close()
		return stores.Opened{}, err
	}
	stores.LogFailurePolicy(log, st.Failure)
	return o.remote.wrapRemote(st, o.localCache, o.localCacheBytes, mem, log), nil
}
