package stores

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/backoff"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/relief"
	"github.com/sluicehq/sluice/service"
)

// Opened is the store named by -store, opened. Its zero value holds
// nothing: Shutdown on it would panic, Close being nil.
type Opened struct {
	// Limiter decides; the wrappers of serve (reservations, local share,
	// over-limit cache) replace it with one in front of it.
	Limiter sluice.Limiter
	// Failure is the failure policy of a remote store, for the service
	// to apply; nil for the memory store.
	Failure *service.FailurePolicy
	// Close releases the store and what it started.
	Close func()
	// Release gives back what the store holds for this process (the
	// units of -reserve-units or -lease-share, then its place in the
	// fleet's count), within its context; nil when nothing is held.
	Release func(ctx context.Context)
	// Connected reports whether the store has answered once (see
	// redisstore.Lazy); always true for the memory store.
	Connected func() bool
	// Mem is the memory store, nil with Redis or PostgreSQL.
	Mem *memstore.Store
	// Roster returns the membership set of the fleet called name in the
	// store (relief.Fleet counts the processes that share it); nil where
	// the store keeps none: the memory store and PostgreSQL.
	Roster func(name string) relief.Roster
}

// Shutdown releases what the store holds (Release) within ctx, then
// closes it.
func (o Opened) Shutdown(ctx context.Context) {
	if o.Release != nil {
		o.Release(ctx)
	}
	o.Close()
}

// Open opens the store named by store: the memory store configured by
// mem, or Redis with the failure policy of the failure mode named by
// failure, for the caller to apply; that policy's Local store (failure
// mode local's, while Redis fails) is a memory store held to mem's
// MaxBytes and MaxKeys (see FailureLocal). Redis being down is no error: the
// store then fails every call (the failure policy answers) and reconnects
// in the background, logging on log (see redisstore.Lazy). ro are the
// Redis settings (nil: the URL's alone). PostgreSQL is OpenPostgres's.
func Open(ctx context.Context, store string, ro *RedisOptions, failure string, mem memstore.Config, log *slog.Logger) (Opened, error) {
	if Is(store, Memory) {
		return OpenMemory(mem), nil
	}
	mode, err := failsafe.ParseMode(failure)
	if err != nil {
		return Opened{}, err
	}
	rs, err := OpenRedis(ctx, store, ro, log)
	if err != nil {
		return Opened{}, err
	}
	// The service applies each rule's failure_mode (the flag sets the
	// default) behind one breaker around the store (both stores, with
	// -store-per-second).
	// The store of rules whose failure_mode is local (and of every rule
	// with -failure-mode local), while Redis fails.
	local := FailureLocal(mem)
	return Opened{Limiter: rs.Limiter, Failure: &service.FailurePolicy{Mode: mode, Local: local, Timeout: Redis.DecisionTimeout},
		Close: func() { rs.Close(); local.Close() }, Connected: rs.Connected, Roster: rs.Roster}, nil
}

// FailureLocal makes the memory store that failure mode local decides on
// while a remote store fails (and serve's -local-share decides on first),
// held to mem's budget: MaxBytes and MaxKeys
// (0: memstore's defaults), so that a flood of distinct keys while the
// store is down evicts instead of growing the heap. mem's other settings
// (the clock, its resolution, the shards) are not used.
func FailureLocal(mem memstore.Config) *memstore.Store {
	return memstore.New(memstore.Config{MaxBytes: mem.MaxBytes, MaxKeys: mem.MaxKeys})
}

// OpenMemory opens the memory store configured by cfg.
func OpenMemory(cfg memstore.Config) Opened {
	m := memstore.New(cfg)
	return Opened{Limiter: m, Close: func() { m.Close() }, Connected: func() bool { return true }, Mem: m}
}

// PgSweepEvery is how often serve's PostgreSQL store deletes the periods
// of rules that are not billable once they ended (pgstore.Sweep): their
// rows are gone about pgstore.SweepGrace plus this after their period.
const PgSweepEvery = time.Minute

// OpenPostgres opens the PostgreSQL store at url (pgstore.Open), applying
// the migrations first when migrate is set: then the database must answer
// within 5 s (backoff.Attempt), or serve does not start. Without migrate
// nothing connects at start: decisions fail (the failure mode answers)
// until the database answers, and Connected turns true once a ping has
// succeeded.
//
// maxKeys is pgstore.Config.MaxKeysPerGroup (0: its default; negative:
// no bound). The failure policy's Local store is FailureLocal(mem).
//
// Quotas are accounting, so the failure mode defaults to closed on
// PostgreSQL: when the operator set no -failure-mode (failureSet false),
// a failed decision is refused, and the log says so.
func OpenPostgres(ctx context.Context, url, failure string, failureSet, migrate bool, maxKeys int64, mem memstore.Config, log *slog.Logger) (Opened, error) {
	mode, err := failsafe.ParseMode(failure)
	if err != nil {
		return Opened{}, err
	}
	if !failureSet {
		mode = failsafe.Closed
	}
	st, err := connectPostgres(ctx, url, pgstore.Config{NoMigrate: !migrate, Logger: log, SweepEvery: PgSweepEvery, MaxKeysPerGroup: maxKeys})
	if err != nil {
		if migrate {
			return Opened{}, fmt.Errorf("%s: %w (with -migrate=false serve starts without the database, once `sluice migrate` has brought its schema up to date)", Name(url), err)
		}
		return Opened{}, fmt.Errorf("%s: %w", Name(url), err)
	}
	log.Info("store PostgreSQL", "store", Name(url), "migrated", migrate, "sweep_not_billable_every", PgSweepEvery, "max_keys_per_group", maxKeys,
		"failure_mode", mode.String(), "failure_mode_from", map[bool]string{true: "-failure-mode", false: "the default on PostgreSQL: quotas fail closed"}[failureSet])
	var up atomic.Bool
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	if migrate {
		up.Store(true)
		close(done)
	} else {
		go pingUntilUp(bg, st, &up, log, done)
	}
	local := FailureLocal(mem)
	return Opened{Limiter: st, Failure: &service.FailurePolicy{Mode: mode, Local: local, Timeout: Postgres.DecisionTimeout},
		Close:     func() { stop(); <-done; st.Close(); local.Close() },
		Connected: up.Load}, nil
}

// ConnectPostgres opens the PostgreSQL database at url (applying the
// schema's migrations when migrate), waiting at most backoff.Attempt for
// it: serve's store, its admin API's usage pool and the plans' database,
// in serve and proxy, open theirs with it.
func ConnectPostgres(ctx context.Context, url string, migrate bool) (*pgstore.Store, error) {
	return ConnectPostgresLog(ctx, url, migrate, nil, 0)
}

// ConnectPostgresLog is ConnectPostgres whose store logs to log (nil:
// slog.Default()) and sweeps every sweep (0: never; see
// pgstore.Config.SweepEvery): serve's decisions store, whose refusals of
// keys past pgstore's cap on distinct keys per group and period are logged
// there, and which deletes the ended periods of rules that are not
// billable.
func ConnectPostgresLog(ctx context.Context, url string, migrate bool, log *slog.Logger, sweep time.Duration) (*pgstore.Store, error) {
	return connectPostgres(ctx, url, pgstore.Config{NoMigrate: !migrate, Logger: log, SweepEvery: sweep})
}

// connectPostgres opens the database at url with cfg, waiting at most
// backoff.Attempt; an error has url's secrets masked.
func connectPostgres(ctx context.Context, url string, cfg pgstore.Config) (*pgstore.Store, error) {
	cctx, cancel := context.WithTimeout(ctx, backoff.Attempt)
	defer cancel()
	st, err := pgstore.Open(cctx, url, cfg)
	return st, redact.Error(err, url)
}

// pingUntilUp pings st's database, with backoff.Retry's back-off, until it
// answers (up is then set) or ctx ends; it closes done when it returns.
func pingUntilUp(ctx context.Context, st *pgstore.Store, up *atomic.Bool, log *slog.Logger, done chan<- struct{}) {
	defer close(done)
	if backoff.Retry(ctx, false, st.Pool().Ping) {
		up.Store(true)
		log.Info("rate limit store connected")
	}
}
