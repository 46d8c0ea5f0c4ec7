// Package pgstore is a sluice.Limiter on PostgreSQL for quotas: allowances
// over a period that must be exact and durable, such as the calls a tenant's
// plan allows per month, counted where a customer's bill can be checked.
//
// It serves the fixed window only (sluice.FixedWindow; ValidateLimit
// refuses the other algorithms, which memstore and redisstore serve). Each
// decision, admitted or refused, is one statement: it refuses on the
// period's committed count, with no lock and no write, when that count
// leaves no room, and otherwise runs an INSERT … ON CONFLICT DO UPDATE …
// WHERE that adds the cost to the period's row only if the count stays
// within the quota, guarded on the insert path too, under PostgreSQL's
// default READ COMMITTED isolation: exact under any number of processes and
// connections, with no lost update and no transaction to retry.
//
// The period is computed in Go from the store's Clock and passed to the
// statement as a start and an end: a window of Period aligned to the Unix
// epoch, or, for a limit with a sluice.Calendar, the calendar period that
// holds now (a month resetting on the 15th, Berlin time), with ResetAfter
// the exact time to its end. Spend takes a period the caller computes. The
// row a decision counts in is also the ledger row of its period: for a
// billable limit (sluice.Limit.Billable) it stays after the period ends,
// until Prune deletes it, and Usage and Ledger read it back; the rows of
// other limits are deleted by Sweep once their period has ended
// (Config.SweepEvery runs it in the background), so that keys a client
// chooses leave no lasting rows.
//
// Its schema is applied by Migrate (Open and New call it) from SQL files
// embedded in the package.
//
// Decisions are exact under timeouts: a decision that fails, or whose
// caller gave up, counts nothing (AllowN says how); at most Config.PerKey
// decisions of one key hold a connection at once, so a hot key leaves the
// pool to the others; a group of keys holds at most
// Config.MaxKeysPerGroup keys per period, so client-chosen keys cannot
// grow the ledger without bound; and Prune deletes the periods that have
// ended, the ledger's retention.
//
// When a key's limit changes period, counting goes on in the row of the
// period that holds now under the new limit: a row that starts at the same
// instant is continued (its end moved to the new period's), any other
// period starts from zero.
package pgstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	cut "github.com/sluicehq/sluice/internal/clip"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/redact"
)

// Config configures a Store. The zero Config is usable.
type Config struct {
	// Clock tells the time that periods are computed from; nil means the
	// system clock. Processes that share a database should keep their
	// clocks in step: a period boundary is where each one's clock puts it.
	Clock sluice.Clock
	// NoMigrate leaves the schema alone: New and Open neither migrate nor
	// connect, so a process can start while the database is down, its
	// decisions failing until it is back. The schema must then be brought
	// up to date by Migrate beforehand (a `migrate` command). The zero
	// value migrates.
	NoMigrate bool
	// PerKey bounds the decisions of one key that hold a connection at
	// once; the others wait in the process until one of them ends or
	// their context does (then nothing was sent, and nothing is counted).
	// Decisions of one key queue on its row's lock in PostgreSQL anyway, so
	// a hot key gains nothing from more: the rest of the pool stays free
	// for other keys. Zero means DefaultPerKey.
	PerKey int
	// Settle is how long a decision already sent to PostgreSQL is waited
	// for after its caller's deadline (with no deadline: in all), since
	// the statement is not cancelled from the client side (see AllowN).
	// One that has not answered by then is given up: its connection is
	// closed, and its error wraps ErrInDoubt. Zero means DefaultSettle.
	Settle time.Duration
	// MaxKeysPerGroup bounds the distinct keys counted in one group of
	// keys (see Group) in one period: the first decision of a key past it
	// is refused with an error wrapping ErrTooManyKeys, and writes no row,
	// so a client that chooses descriptor values cannot grow the ledger
	// without bound (at most MaxKeysPerGroup rows of at most
	// sluice.MaxKeyLen bytes per group and period). Keys that already have
	// their row in the period are served as before. Zero means
	// DefaultMaxKeysPerGroup; a negative value, no bound.
	//
	// The bound is hard across processes. Each Store takes a group's
	// places in blocks (1, 2, 4, … MaxPlaceBlock) and hands them to its own
	// new keys, so that new keys of one group are not written one at a
	// time; the places a Store holds and has not used count against the
	// bound, so a new key may be refused while the group holds fewer keys:
	// by at most MaxPlaceBlock places for each Store that took places in
	// the group in the period (for each period length, where limits of
	// different lengths in the group share a start: their keys share the
	// group's count), places a Store held at the period's end, or when it
	// stopped, being lost for that period.
	MaxKeysPerGroup int64
	// Group names the group a key counts in for MaxKeysPerGroup; nil means
	// DefaultGroup.
	Group func(key string) string
	// Logger receives a warning, at most once per 10 seconds with the
	// count since the last, while keys are refused for MaxKeysPerGroup,
	// and a warning when a background Sweep fails; nil means
	// slog.Default().
	Logger *slog.Logger
	// SweepEvery, when positive, runs Sweep in the background at this
	// interval from New until Close, so that the periods of limits that
	// are not billable are deleted within about SweepEvery after
	// SweepGrace past their end. Zero or negative: no background sweep
	// (call Sweep, or `sluice migrate prune`, to delete them).
	SweepEvery time.Duration
}

// DefaultMaxKeysPerGroup is Config.MaxKeysPerGroup's default.
const DefaultMaxKeysPerGroup = 100_000

// DefaultGroup is Config.Group's default: the key up to its last '_', or
// "" when it has none. The keys sluice serve spells are the domain, then
// each descriptor entry's key and value joined by '_' (a value's own '_'
// escaped), so a key's group is its descriptor with the last value left
// out: "api_tenant" for every "api_tenant_<value>", or, for
// "api_tenant_acme_path_<value>", the paths of tenant acme.
func DefaultGroup(key string) string {
	if i := strings.LastIndexByte(key, '_'); i >= 0 {
		return key[:i]
	}
	return ""
}

// ErrTooManyKeys is wrapped by the error of a key's first decision in a
// period when its group already holds Config.MaxKeysPerGroup keys in that
// period. It matches sluice.ErrBadInput: the caller chose one key too many,
// the store did not fail (package failsafe passes it through, tripping
// nothing; faces answer it as a bad request, with its message).
var ErrTooManyKeys error = tooManyKeysError{}

type tooManyKeysError struct{}

func (tooManyKeysError) Error() string { return "pgstore: too many keys in the group for the period" }

// Is makes ErrTooManyKeys match sluice.ErrBadInput.
func (tooManyKeysError) Is(target error) bool { return target == sluice.ErrBadInput }

// DefaultPerKey is Config.PerKey's default: two decisions of a key in
// flight, so that one's round trip overlaps the other's work on the row.
const DefaultPerKey = 2

// DefaultSettle is Config.Settle's default.
const DefaultSettle = 5 * time.Second

// ErrInDoubt is wrapped by the error of a decision whose statement was sent
// and whose answer never came (the connection broke, or Config.Settle ran
// out): PostgreSQL may have counted it or not. It is the one case in which
// the ledger may count units that no caller was told were admitted: at most
// the cost of the decisions in flight when the connection was lost.
var ErrInDoubt = errors.New("pgstore: the decision was sent and its outcome is unknown")

// Store is a sluice.Limiter, sluice.Refunder, sluice.Peeker and
// sluice.LimitValidator on a PostgreSQL pool. It is safe for concurrent use.
// The zero Store is not usable; see Open and New.
type Store struct {
	pool   *pgxpool.Pool
	owned  bool
	clock  sluice.Clock
	gate   *gate
	settle time.Duration

	maxKeys int64 // Config.MaxKeysPerGroup; 0 for no bound
	group   func(string) string
	places  *places // the groups' places this store holds (places.go)
	log     *slog.Logger
	// refused counts the keys refused for MaxKeysPerGroup: in all, and
	// since the last log line; lastLog is that line's time (Unix ns).
	refused, refusedSince, lastLog atomic.Int64
	// stopSweep ends the background sweep (nil without one); swept
	// counts the rows it deleted.
	stopSweep func()
	swept     atomic.Int64
}

var (
	_ sluice.Limiter        = (*Store)(nil)
	_ sluice.Refunder       = (*Store)(nil)
	_ sluice.Peeker         = (*Store)(nil)
	_ sluice.LimitValidator = (*Store)(nil)
)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string, with pgxpool's pool_* settings), applies the
// migrations, and returns a Store that owns the pool: Close closes it. It
// fails if the database cannot be reached before ctx ends, unless
// cfg.NoMigrate, when it does not connect at all. Its errors show none of
// url's secrets (its password, a password or other secret parameter),
// whatever the driver's errors echo.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", redact.Error(err, url))
	}
	s, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, redact.Error(err, url)
	}
	s.owned = true
	return s, nil
}

// New applies the migrations on pool (unless cfg.NoMigrate) and returns a
// Store that uses it. The caller keeps the pool: Close leaves it open.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if !cfg.NoMigrate {
		if err := Migrate(ctx, pool); err != nil {
			return nil, err
		}
	}
	if cfg.PerKey < 0 || cfg.Settle < 0 {
		return nil, fmt.Errorf("pgstore: Config.PerKey %d and Config.Settle %v must not be negative", cfg.PerKey, cfg.Settle)
	}
	per := cmp.Or(cfg.PerKey, DefaultPerKey)
	maxKeys := cmp.Or(cfg.MaxKeysPerGroup, DefaultMaxKeysPerGroup)
	if maxKeys < 0 {
		maxKeys = 0
	}
	st := &Store{pool: pool, clock: sluice.ClockOr(cfg.Clock), gate: newGate(per), settle: cmp.Or(cfg.Settle, DefaultSettle),
		maxKeys: maxKeys, group: cfg.Group, places: newPlaces(), log: cfg.Logger}
	if st.group == nil {
		st.group = DefaultGroup
	}
	if st.log == nil {
		st.log = slog.Default()
	}
	if cfg.SweepEvery > 0 {
		st.startSweep(cfg.SweepEvery)
	}
	return st, nil
}

// Pool returns the store's pool, for code that keeps more in the same
// database. A connection of the pool may carry, in its session, the
// statement_timeout of the store's last decision on it (a few hundred
// milliseconds, say): code that runs long statements on it sets its own.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close stops the background sweep, if any, and closes the pool if Open
// made it. It always returns nil.
func (s *Store) Close() error {
	if s.stopSweep != nil {
		s.stopSweep()
	}
	if s.owned {
		s.pool.Close()
	}
	return nil
}

func (s *Store) now() time.Time { return s.clock.Now() }

// ValidateLimit returns nil for a valid fixed-window limit whose period is a
// whole number of microseconds (PostgreSQL's timestamps count microseconds),
// and an error wrapping sluice.ErrInvalidLimit otherwise. It needs no
// database.
func ValidateLimit(lim sluice.Limit) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	if lim.Algorithm != sluice.FixedWindow {
		return fmt.Errorf("%w: pgstore serves fixed_window quotas only, not %v (memstore and redisstore serve it)", sluice.ErrInvalidLimit, lim.Algorithm)
	}
	if lim.Period%time.Microsecond != 0 {
		return fmt.Errorf("%w: pgstore keeps time in microseconds, as PostgreSQL does; period %v is not a whole number of them", sluice.ErrInvalidLimit, lim.Period)
	}
	return nil
}

// ValidateLimit is the package's ValidateLimit.
func (s *Store) ValidateLimit(lim sluice.Limit) error { return ValidateLimit(lim) }

// check validates a call's input: sluice.Check, then the limits this store
// refuses.
func check(key string, lim sluice.Limit, cost int) error {
	if err := sluice.Check(key, lim, cost); err != nil {
		return err
	}
	return ValidateLimit(lim)
}

// window returns the fixed window of lim that holds now, [start, end), as
// package algorithm's FixedWindow counts in (algorithm.FixedWindowPeriod):
// the calendar period that holds now for a limit with a Calendar, else the
// window of Period aligned to the Unix epoch.
func window(now time.Time, lim sluice.Limit) (start, end time.Time) {
	s, e := algorithm.FixedWindowPeriod(lim, now.UnixNano())
	return time.Unix(0, s).UTC(), time.Unix(0, e).UTC()
}

// Allow is AllowN with a cost of 1.
func (s *Store) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return s.AllowN(ctx, key, lim, 1)
}

// AllowN spends cost units of key's quota in the fixed window that holds
// the store's current time, if the window's count stays within lim.Rate.
// A denial spends nothing and reports the window's count as it is after the
// decision: Remaining is what is left of the quota, RetryAfter and
// ResetAfter the time to the window's end. Errors wrap sluice.ErrBadInput
// for bad input (ErrTooManyKeys for a new key past
// Config.MaxKeysPerGroup), and the database's error (or ctx's) otherwise.
//
// It is exact whatever ctx's deadline: units are counted only for a
// decision it returns admitted. It waits for its key's place
// (Config.PerKey) and a connection until ctx ends, sending nothing then;
// once sent, the statement is bounded on the server's side by the time
// ctx has left, and its answer is returned even when it comes after ctx
// ended. An error wraps context.DeadlineExceeded when the server stopped
// the statement (nothing counted), and ErrInDoubt when its answer never
// came (the connection broke, or Config.Settle ran out).
func (s *Store) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := check(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	now := s.now()
	start, end := window(now, lim)
	count, ok, end, err := s.spend(ctx, key, start, end, int64(lim.Rate), int64(cost), lim.Billable)
	if err != nil {
		return sluice.Result{}, err
	}
	res := sluice.Result{Allowed: ok, Remaining: int(max(int64(lim.Rate)-count, 0)), ResetAfter: end.Sub(now)}
	if !ok {
		res.RetryAfter = res.ResetAfter
	}
	return res, nil
}

// Spend adds cost units to key's count in the period [start, end) if the
// count stays within quota, in one statement, and returns the count after
// the decision and whether it was admitted. It is AllowN for a period the
// caller computes (a calendar month, say); every caller must compute a
// period's start the same way, as the start names the period. A denied
// call's count is the one it was refused on, the count committed when the
// decision began; a decision that waited on a concurrent one and was then
// refused reads the count again after it, which may include units others
// spent meanwhile. Its period is billable: kept after it ends, until
// pruned (see sluice.Limit.Billable). Errors wrap sluice.ErrBadInput for a bad key, an
// empty period, a quota outside [1, sluice.MaxRate] or a cost outside
// [1, quota].
func (s *Store) Spend(ctx context.Context, key string, start, end time.Time, quota, cost int64) (count int64, admitted bool, err error) {
	if err := checkPeriod(key, start, end, quota, cost); err != nil {
		return 0, false, err
	}
	count, admitted, _, err = s.spend(ctx, key, start, end, quota, cost, true)
	return count, admitted, err
}

func checkPeriod(key string, start, end time.Time, quota, cost int64) error {
	if err := sluice.Check(key, sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Second}, 1); err != nil {
		return err
	}
	switch {
	case !end.After(start):
		return fmt.Errorf("%w: period ends at %v, not after its start %v", sluice.ErrInvalidLimit, end, start)
	case quota < 1 || quota > sluice.MaxRate:
		return fmt.Errorf("%w: quota %d must be between 1 and %d", sluice.ErrInvalidLimit, quota, int64(sluice.MaxRate))
	case cost < 1:
		return fmt.Errorf("%w: cost %d must be at least 1", sluice.ErrInvalidCost, cost)
	case cost > quota:
		return fmt.Errorf("%w: cost %d exceeds the quota %d", sluice.ErrCostExceedsCapacity, cost, quota)
	}
	return nil
}

// spendSQL is a decision, one statement whether it admits or refuses.
//
// cur reads the period's committed count. When it leaves no room, the
// insert's row source is empty: the statement refuses on that count with
// no row lock and no write, so a client past its quota neither queues on
// the row behind its admissions nor costs the database a write; a refusal
// changes nothing, so one made on the count committed when the statement
// began is as exact as one made under the lock.
//
// Otherwise the upsert decides: its row source is also empty when the cost
// alone exceeds the quota (the DO UPDATE's WHERE guards only the update),
// and a conflicting row is locked and its latest version checked, so
// concurrent admissions queue on the row and none is lost. A row it
// inserts (the key's first admission in the period) that names its group
// ($7) takes a place in the group, by migration 0003's trigger, or fails
// the statement with SQLSTATE SLK01 when the group has none left; a row
// whose place the store took beforehand (places.go), or whose store caps
// nothing, names none ($7 NULL) and runs no trigger (migration 0005): the
// cap costs nothing to a key that has its row. $8 is whether the limit is
// billable: the row is kept after its period (the ledger) or swept
// (Sweep); an admission sets it to the limit's latest.
//
// $9 is whether the statement may insert the key's row: false for a
// decision of a capped group whose store holds no free place and expects
// the key to have its row (places.go), which then, if the key has none in
// the statement's snapshot, writes nothing and says so, and is sent again
// as claimSQL.
//
// It returns one row: the count, whether admitted, the period's end,
// whether the count is the one the decision was made on, whether the
// statement inserted the key's row (a row it updates has a locker in its
// xmax; one it inserted has none), and whether it wrote nothing for want
// of a place ($9 false, no row). The fourth is false only when the
// upsert refused after a concurrent writer's commit (cur saw room, or no
// row, and the row it then locked had none), or for want of a place: cur
// predates that commit, as every read in the statement shares its
// snapshot, so the count must be read again.
const spendSQL = `WITH cur AS (
	SELECT count FROM sluice_usage WHERE key_hash = $1 AND period_start = $2
), up AS (
	INSERT INTO sluice_usage AS u (key_hash, period_start, period_end, key, count, quota, key_group, billable)
	SELECT $1, $2, $3, $4, $5::bigint, $6::bigint, $7, $8
	WHERE $5::bigint <= $6::bigint AND ($9::boolean OR EXISTS (SELECT FROM cur))
		AND NOT EXISTS (SELECT FROM cur WHERE cur.count + $5::bigint > $6::bigint)
	ON CONFLICT (key_hash, period_start) DO UPDATE
	SET count = u.count + excluded.count, period_end = excluded.period_end, quota = excluded.quota,
		billable = excluded.billable, updated_at = now()
	WHERE u.count + excluded.count <= excluded.quota
	RETURNING u.count, u.period_end, u.xmax = 0 AS inserted
)
SELECT count, true, period_end, true, inserted, false FROM up
UNION ALL
SELECT coalesce((SELECT count FROM cur), 0), false, $3::timestamptz,
	EXISTS (SELECT FROM cur WHERE cur.count + $5::bigint > $6::bigint), false,
	NOT $9::boolean AND NOT EXISTS (SELECT FROM cur)
WHERE NOT EXISTS (SELECT FROM up)`

// claimSQL is spendSQL for a decision of a capped group whose store holds
// no free place of the group ($7, not NULL): when the key has no row in the
// statement's snapshot, claim first takes a block of $9 places from the
// group's row, all of them or none, never past the cap $10 (see places.go);
// the key's row then names no group if the block was taken, and its group
// otherwise, so that the trigger takes one place for it or refuses it. A
// block of 0 takes nothing (its group row is made, with 0 keys, if there
// is none yet): the key's place is the trigger's.
// claim locks the group's row even when it takes nothing (ON CONFLICT DO
// UPDATE locks the row its WHERE refuses), before the key's row is
// written: the lock order places.go states. Besides spendSQL's columns it
// returns whether the block was asked for (the key had no row) and
// whether it was taken.
const claimSQL = `WITH cur AS (
	SELECT count FROM sluice_usage WHERE key_hash = $1 AND period_start = $2
), claim AS (
	INSERT INTO sluice_usage_groups AS g (group_hash, period_start, period_end, keys)
	SELECT $7, $2, $3, $9::bigint
	WHERE $5::bigint <= $6::bigint AND $9::bigint <= $10::bigint AND NOT EXISTS (SELECT FROM cur)
	ON CONFLICT (group_hash, period_start) DO UPDATE
	SET keys = g.keys + excluded.keys, period_end = greatest(g.period_end, excluded.period_end)
	WHERE $9::bigint > 0 AND g.keys + excluded.keys <= $10::bigint
	RETURNING $9::bigint > 0 AS granted
), up AS (
	INSERT INTO sluice_usage AS u (key_hash, period_start, period_end, key, count, quota, key_group, billable)
	SELECT $1, $2, $3, $4, $5::bigint, $6::bigint, CASE WHEN EXISTS (SELECT FROM claim WHERE granted) THEN NULL ELSE $7::bytea END, $8
	WHERE $5::bigint <= $6::bigint AND NOT EXISTS (SELECT FROM cur WHERE cur.count + $5::bigint > $6::bigint)
	ON CONFLICT (key_hash, period_start) DO UPDATE
	SET count = u.count + excluded.count, period_end = excluded.period_end, quota = excluded.quota,
		billable = excluded.billable, updated_at = now()
	WHERE u.count + excluded.count <= excluded.quota
	RETURNING u.count, u.period_end, u.xmax = 0 AS inserted
)
SELECT count, true, period_end, true, inserted, NOT EXISTS (SELECT FROM cur), EXISTS (SELECT FROM claim WHERE granted) FROM up
UNION ALL
SELECT coalesce((SELECT count FROM cur), 0), false, $3::timestamptz,
	EXISTS (SELECT FROM cur WHERE cur.count + $5::bigint > $6::bigint), false,
	NOT EXISTS (SELECT FROM cur), EXISTS (SELECT FROM claim WHERE granted)
WHERE NOT EXISTS (SELECT FROM up)`

// tooManyKeysCode is the SQLSTATE of migration 0003's trigger when a key's
// group has no place left in the period.
const tooManyKeysCode = "SLK01"

// isTooManyKeys reports whether err is the trigger's refusal for the cap.
func isTooManyKeys(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == tooManyKeysCode
}

// deadlockDetected is PostgreSQL's SQLSTATE for a statement aborted to
// break a cycle of lock waits (deadlock_detected).
const deadlockDetected = "40P01"

// isDeadlock reports whether err is PostgreSQL's abort of a statement for
// a deadlock.
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == deadlockDetected
}

// countSQL reads a period's count.
const countSQL = `SELECT count FROM sluice_usage WHERE key_hash = $1 AND period_start = $2`

// setTimeoutSQL sets the session's statement_timeout, in milliseconds.
const setTimeoutSQL = `SELECT set_config('statement_timeout', $1, false)`

// setSessionSQL sets the session's statement_timeout, in milliseconds, and
// the cap on keys per group that migration 0003's trigger reads: sent in
// the same pipeline as a decision's statement (one round trip) when the
// connection's values are not the ones the decision needs (see
// serverTimeout), it bounds the statement to its caller's time on the
// server's side.
const setSessionSQL = `SELECT set_config('statement_timeout', $1, false), set_config('sluice.max_keys_per_group', $2, false)`

// session is what a connection's session has been set to by setSessionSQL:
// statement_timeout (ms; -1: unknown) and the cap (0: not set).
type session struct{ timeout, maxKeys int64 }

// timeoutKey is the key, in a connection's pgconn CustomData, of the
// statement_timeout its session has (an *int64 of milliseconds; absent:
// the server's default, taken as 0, none).
const timeoutKey = "sluice.pgstore.statement_timeout"

// serverTimeout is the statement_timeout a decision with left of its time
// runs under: left rounded up to a step (10 ms up to 100 ms, 50 ms up to
// 1 s, 500 ms above), so that decisions of similar deadlines find their
// connection's session already set and send no set_config. The server
// stops a statement at most one step after its caller's deadline.
func serverTimeout(left time.Duration) int64 {
	ms := int64((left + time.Millisecond - 1) / time.Millisecond)
	step := int64(500)
	switch {
	case ms <= 100:
		step = 10
	case ms <= 1000:
		step = 50
	}
	return (ms + step - 1) / step * step
}

// sessionOf returns the cell in conn's CustomData that holds what its
// session was set to (made, as the server's defaults, on first use).
func sessionOf(conn *pgx.Conn) *session {
	cd := conn.PgConn().CustomData()
	if p, ok := cd[timeoutKey].(*session); ok {
		return p
	}
	p := &session{}
	cd[timeoutKey] = p
	return p
}

// untimed acquires a connection of the pool whose session has no
// statement_timeout (setting it back if a decision set one), for a
// statement that may run long (Usage, Ledger). op names the operation in
// errors. The caller releases the connection.
func (s *Store) untimed(ctx context.Context, op string) (*pgxpool.Conn, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if err := clearTimeout(ctx, conn.Conn()); err != nil {
		conn.Release()
		return nil, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return conn, nil
}

// clearTimeout sets conn's session back to no statement_timeout, if a
// decision set one.
func clearTimeout(ctx context.Context, conn *pgx.Conn) error {
	p := sessionOf(conn)
	if p.timeout == 0 {
		return nil
	}
	p.timeout = -1
	if _, err := conn.Exec(ctx, setTimeoutSQL, "0"); err != nil {
		return err
	}
	p.timeout = 0
	return nil
}

// isTimeout reports whether err is a network timeout: the connection's
// deadline (Settle) passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// queryCanceled is PostgreSQL's SQLSTATE for a statement it cancelled
// (query_canceled), statement_timeout's among them.
const queryCanceled = "57014"

// spend runs spendSQL and, only for a refusal the upsert made after a
// concurrent commit, countSQL. It returns the period's count, whether the
// cost was admitted, and the period's end.
//
// A decision is exact whatever its caller's deadline: the units
// PostgreSQL counts are the units of the decisions spend reports admitted.
// Everything that may wait before the statement is sent waits in the
// process and ends with ctx (the key's place in the gate, a connection of
// the pool): nothing is sent then. Once sent, the statement is never
// cancelled from the client side, since a cancellation (or a closed
// connection) that reaches the server after the commit would leave units
// counted for a caller told "failed". Instead the server cancels it: the
// pipeline first sets statement_timeout to the time ctx has left, which
// stops the statement, and rolls it back, where it is still executing
// (waiting on the row's lock, say), and never during its commit. spend
// then waits for the server's answer, whatever it is, and reports it,
// even after ctx has ended: an admission is returned as one (its caller's
// wrapper, failsafe, takes a result that comes late), a cancellation as an
// error. Only an answer that has not come Settle after the deadline is
// given up, as ErrInDoubt.
func (s *Store) spend(ctx context.Context, key string, start, end time.Time, quota, cost int64, billable bool) (int64, bool, time.Time, error) {
	h := hash(key)
	var conn *pgxpool.Conn
	var sl *slot
	defer func() {
		if conn != nil {
			s.leave(h, sl, conn)
		}
	}()
	var err error
	var count int64
	var admitted, decidedOn bool
	var until time.Time
	var o outcome
	dest := []any{&count, &admitted, &until, &decidedOn, &o.inserted, &o.needsPlace}
	if s.maxKeys == 0 {
		// The cap off: the row names no group (NULL, as migration 0003
		// says of a writer that caps nothing), and the group is not hashed.
		if conn, sl, err = s.enter(ctx, h, "spending"); err != nil {
			return 0, false, end, err
		}
		err = s.write(ctx, conn, "spending", dest, spendSQL, h[:], start, end, []byte(key), cost, quota, nil, billable, true)
	} else {
		gh := hash(s.group(key))
		// At most two statements: a probe that found the key new is sent
		// again, then with a place or a claim. The ticket is taken before
		// the key's place in the gate and a connection: a decision that
		// waits for a block in flight (its claim slow on the group's row)
		// holds neither, so the pool stays free for other groups. The
		// second, taken holding them, is only taken if it need not wait;
		// else they are given back first.
		for again := false; ; again = true {
			var t ticket
			ok := false
			if conn != nil {
				if t, ok = s.places.tryTake(gh, start, end, s.now(), s.maxKeys, false); !ok {
					s.leave(h, sl, conn)
					conn = nil
				}
			}
			if !ok {
				var werr error
				t, werr = s.places.take(ctx, gh, start, end, s.now(), s.maxKeys, !again)
				if werr != nil {
					return 0, false, end, fmt.Errorf("pgstore: spending: waiting for a block of the group's places: %w", werr)
				}
				if conn, sl, err = s.enter(ctx, h, "spending"); err != nil {
					s.places.settle(t, outcome{})
					return 0, false, end, err
				}
			}
			o = outcome{}
			if t.held || t.probe {
				err = s.write(ctx, conn, "spending", dest, spendSQL, h[:], start, end, []byte(key), cost, quota, nil, billable, t.held)
			} else {
				err = s.write(ctx, conn, "spending", []any{&count, &admitted, &until, &decidedOn, &o.inserted, &o.tried, &o.granted},
					claimSQL, h[:], start, end, []byte(key), cost, quota, gh[:], billable, t.claim, s.maxKeys)
				if isDeadlock(err) {
					// A claim aborted for a deadlock waited in a cycle with
					// a writer that locks in the other order: a binary
					// from before migration 0005 (it inserts the key's
					// row, then locks the group's row through migration
					// 0003's trigger), deciding the same new key during a
					// rolling deploy. The claim was rolled back whole; it
					// is sent again once, in that writer's order (the
					// key's row naming its group, its place taken alone by
					// the trigger), so that it waits for the other's key
					// row instead of taking the group's row first again.
					o = outcome{}
					err = s.write(ctx, conn, "spending", dest, spendSQL, h[:], start, end, []byte(key), cost, quota, gh[:], billable, true)
				}
			}
			o.sent = err == nil
			o.inDoubt = errors.Is(err, ErrInDoubt)
			if !o.sent {
				o.inserted, o.granted, o.needsPlace = false, false, false
				o.tried = isTooManyKeys(err)
			}
			s.places.settle(t, o)
			if !o.needsPlace {
				break
			}
		}
		s.giveBack(ctx, conn)
	}
	if isTooManyKeys(err) {
		return 0, false, end, s.tooManyKeys(key, start)
	}
	if err != nil {
		return 0, false, end, err
	}
	if decidedOn {
		return count, admitted, until, nil
	}
	// A refusal: nothing was counted, so reading the count may end with
	// ctx.
	count, err = countOn(ctx, conn.Conn(), h[:], start)
	return count, false, end, err
}

// giveBackSQL gives n unused places of a group's period back to its row:
// $1 the group's hash, $2 the period's start, $3 n.
const giveBackSQL = `UPDATE sluice_usage_groups SET keys = keys - $3::bigint
WHERE group_hash = $1 AND period_start = $2 AND keys >= $3::bigint`

// giveBack gives the places of the entries the places table dropped back
// to their groups' rows, on conn, one statement each (the table drops
// entries only when full, so rarely). A place whose statement fails is
// lost, as the places a stopped Store held are. The statements outlive
// ctx's end (a client that hangs up must not make places lost): their
// wait is bounded by Config.Settle alone.
func (s *Store) giveBack(ctx context.Context, conn *pgxpool.Conn) {
	ctx = context.WithoutCancel(ctx)
	for _, b := range s.places.returned() {
		if err := s.write(ctx, conn, "giving back places", nil, giveBackSQL, b.k.group[:], time.UnixMicro(b.k.start), b.n); err != nil {
			s.log.Warn("pgstore: places of a group dropped from a full table were not given back; lost for the period", "places", b.n, "err", err)
		}
	}
}

// enter waits, until ctx ends, for a place in the gate for the key whose
// hash is h and for a connection; leave gives both back. op names the
// operation in errors.
func (s *Store) enter(ctx context.Context, h [sha256.Size]byte, op string) (*pgxpool.Conn, *slot, error) {
	sl, err := s.gate.enter(ctx, h)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: %s: waiting for the key's other decisions (at most %d in flight): %w", op, s.gate.per, err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		s.gate.exit(h, sl)
		return nil, nil, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return conn, sl, nil
}

// leave ends what enter began.
func (s *Store) leave(h [sha256.Size]byte, sl *slot, conn *pgxpool.Conn) {
	conn.Release()
	s.gate.exit(h, sl)
}

// write runs one statement (a write, or Peek's read), sql with args, on conn, as spend
// documents: not sent when ctx has ended; once sent, bounded by the server
// (statement_timeout, set in the same round trip to the time ctx has
// left) and its answer waited for up to Settle past the deadline. Its row
// is scanned into dest; with no dest, it is executed and its rows, if
// any, discarded. op names the operation in errors.
func (s *Store) write(ctx context.Context, conn *pgxpool.Conn, op string, dest []any, sql string, args ...any) error {
	bound := s.settle
	var want int64 // the statement_timeout the statement needs, ms; 0: none
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 || ctx.Err() != nil {
			return fmt.Errorf("pgstore: %s: %w", op, cmp.Or(ctx.Err(), context.DeadlineExceeded))
		}
		want = serverTimeout(left)
		bound += time.Duration(want) * time.Millisecond
	} else if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	// The statement's context keeps ctx's values but not its end, so pgx
	// never cancels the statement (nor watches a context for it); the
	// bound on the wait is a deadline on the connection itself, cleared
	// once the answer is in. Past it, a read fails and pgx closes the
	// connection: the outcome is in doubt.
	sctx := ctx
	if ctx.Done() != nil {
		sctx = context.WithoutCancel(ctx)
	}
	nc := conn.Conn().PgConn().Conn()
	nc.SetDeadline(time.Now().Add(bound))
	defer nc.SetDeadline(time.Time{})
	sess := sessionOf(conn.Conn())
	var err error
	switch {
	case sess.timeout != want || sess.maxKeys != s.maxKeys:
		// The session's statement_timeout changes with the statement, in
		// its round trip: set_config runs first, so the statement's own
		// timer starts under the new value. Recorded only once the batch
		// succeeded; after a failure the session's value is unknown, and
		// the next decision on the connection sets it again.
		*sess = session{timeout: -1}
		var b pgx.Batch
		b.Queue(setSessionSQL, strconv.FormatInt(want, 10), strconv.FormatInt(s.maxKeys, 10))
		b.Queue(sql, args...)
		br := conn.SendBatch(sctx, &b)
		if _, err = br.Exec(); err == nil {
			if dest != nil {
				err = br.QueryRow().Scan(dest...)
			} else {
				_, err = br.Exec()
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			*sess = session{timeout: want, maxKeys: s.maxKeys}
		}
	case dest != nil:
		err = conn.QueryRow(sctx, sql, args...).Scan(dest...)
	default:
		_, err = conn.Exec(sctx, sql, args...)
	}
	if err != nil {
		var pe *pgconn.PgError
		switch {
		case conn.Conn().IsClosed() || isTimeout(err):
			return fmt.Errorf("pgstore: %s: %w: %w", op, ErrInDoubt, err)
		case want > 0 && errors.As(err, &pe) && pe.Code == queryCanceled:
			return fmt.Errorf("pgstore: %s: %w: the server stopped the statement at its caller's deadline, changing nothing: %w", op, context.DeadlineExceeded, err)
		}
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return nil
}

// rowQuerier is what countOn reads with: the store's pool or one of its
// connections.
type rowQuerier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// countOn reads, with q, the count of the period of key hash h that starts
// at start; 0 if there is none.
func countOn(ctx context.Context, q rowQuerier, h []byte, start time.Time) (int64, error) {
	var count int64
	err := q.QueryRow(ctx, countSQL, h, start).Scan(&count)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgstore: reading a count: %w", err)
	}
	return count, nil
}

// KeysRefused returns how many first decisions of a key were refused for
// Config.MaxKeysPerGroup since the Store was made.
func (s *Store) KeysRefused() int64 { return s.refused.Load() }

// tooManyKeys counts and logs (at most once per 10 s) a key refused for
// MaxKeysPerGroup, and returns its error.
func (s *Store) tooManyKeys(key string, start time.Time) error {
	s.refused.Add(1)
	s.refusedSince.Add(1)
	group := clip(s.group(key))
	now := time.Now().UnixNano()
	if last := s.lastLog.Load(); now-last >= int64(10*time.Second) && s.lastLog.CompareAndSwap(last, now) {
		s.log.Warn("pgstore: keys refused: their group holds Config.MaxKeysPerGroup keys in the period",
			"group", group, "max_keys", s.maxKeys, "refused", s.refusedSince.Swap(0), "refused_total", s.refused.Load())
	}
	return fmt.Errorf("%w: the group %q holds %d keys in the period that started at %s; a new key is refused until the next period",
		ErrTooManyKeys, group, s.maxKeys, start.UTC().Format(time.RFC3339))
}

// clip cuts a client-chosen name to at most 64 bytes for a message or a
// log line.
func clip(s string) string { return cut.Ellipsis(s, 64) }

// hash is the row's key: SHA-256 of the key, an index entry of fixed size
// whatever the key's length.
func hash(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

// Peek reports key's quota in the window that holds the store's current
// time without spending or writing: Allowed unless the window's count is
// above lim.Rate (a quota lowered since), Remaining what is left,
// ResetAfter the time to the window's end even for an unused key.
func (s *Store) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	if err := check(key, lim, 1); err != nil {
		return sluice.Result{}, err
	}
	now := s.now()
	start, end := window(now, lim)
	h := hash(key)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return sluice.Result{}, fmt.Errorf("pgstore: peeking: %w", err)
	}
	defer conn.Release()
	// Read as a decision is sent: under a statement_timeout of ctx's time
	// left (none without a deadline), set in the same round trip when the
	// connection's session has another, such as a shorter one an earlier
	// decision with a short deadline left on it.
	var count int64
	err = s.write(ctx, conn, "peeking", []any{&count}, countSQL, h[:], start)
	if errors.Is(err, pgx.ErrNoRows) {
		count, err = 0, nil
	}
	if err != nil {
		return sluice.Result{}, err
	}
	rate := int64(lim.Rate)
	res := sluice.Result{Allowed: count <= rate, Remaining: int(max(rate-count, 0)), ResetAfter: end.Sub(now)}
	if !res.Allowed {
		res.RetryAfter = res.ResetAfter
	}
	return res, nil
}

// refundSQL gives units back to a period, never below zero.
const refundSQL = `UPDATE sluice_usage SET count = greatest(count - $3::bigint, 0), updated_at = now()
WHERE key_hash = $1 AND period_start = $2`

// RefundN gives cost units back to key's count in the window that holds the
// store's current time, never below zero; units spent in an earlier window
// stay spent there. A key with no count in the window is left alone.
func (s *Store) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if err := check(key, lim, cost); err != nil {
		return err
	}
	start, _ := window(s.now(), lim)
	return s.Refund(ctx, key, start, int64(cost))
}

// Refund gives cost units back to key's count in the period that starts at
// start (see Spend), never below zero. Like a decision, it is exact
// whatever ctx's deadline: an error means nothing was given back, unless
// it wraps ErrInDoubt (see AllowN).
func (s *Store) Refund(ctx context.Context, key string, start time.Time, cost int64) error {
	if err := checkPeriod(key, start, start.Add(1), max(cost, 1), cost); err != nil {
		return err
	}
	h := hash(key)
	conn, sl, err := s.enter(ctx, h, "refunding")
	if err != nil {
		return err
	}
	defer s.leave(h, sl, conn)
	return s.write(ctx, conn, "refunding", nil, refundSQL, h[:], start, cost)
}

// Period is one row of the usage ledger: a key's count in one period.
type Period struct {
	// Start and End bound the period: [Start, End).
	Start, End time.Time
	// Count is the units admitted in the period, less those refunded.
	Count int64
	// Quota is the allowance in force at the period's last admission.
	Quota int64
	// Updated is when the row was last written, on the database's clock.
	Updated time.Time
}

// MaxUsagePeriods bounds the periods one Usage call returns.
const MaxUsagePeriods = 1000

// usageSQL reads a key's newest periods, newest first.
const usageSQL = `SELECT period_start, period_end, count, quota, updated_at FROM sluice_usage
WHERE key_hash = $1 ORDER BY period_start DESC LIMIT $2`

// Usage returns key's ledger: its newest periods that have a row (a period
// with no decision has none), at most MaxUsagePeriods, oldest first.
func (s *Store) Usage(ctx context.Context, key string) ([]Period, error) {
	if err := checkPeriod(key, time.Time{}, time.Time{}.Add(1), 1, 1); err != nil {
		return nil, err
	}
	h := hash(key)
	conn, err := s.untimed(ctx, "reading usage")
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, usageSQL, h[:], MaxUsagePeriods)
	if err != nil {
		return nil, fmt.Errorf("pgstore: reading usage: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Period, error) {
		var p Period
		err := r.Scan(&p.Start, &p.End, &p.Count, &p.Quota, &p.Updated)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: reading usage: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// Entry is one row of the ledger export: a key's count in one period.
type Entry struct {
	// Key is the key as AllowN or Spend received it.
	Key string
	Period
}

// ledgerSQL reads the periods that start in [$1, $2), in order.
const ledgerSQL = `SELECT key, period_start, period_end, count, quota, updated_at FROM sluice_usage
WHERE period_start >= $1 AND period_start < $2 ORDER BY period_start, key_hash`

// Ledger calls each for every period that starts in [from, to), every key's,
// in order of the period's start, streaming the rows rather than holding
// them: an export of any size in constant memory. An error from each stops
// the export and is returned as it is; the database's errors are wrapped.
func (s *Store) Ledger(ctx context.Context, from, to time.Time, each func(Entry) error) error {
	conn, err := s.untimed(ctx, "reading the ledger")
	if err != nil {
		return err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, ledgerSQL, from, to)
	if err != nil {
		return fmt.Errorf("pgstore: reading the ledger: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e Entry
		var key []byte
		if err := rows.Scan(&key, &e.Start, &e.End, &e.Count, &e.Quota, &e.Updated); err != nil {
			return fmt.Errorf("pgstore: reading the ledger: %w", err)
		}
		e.Key = string(key)
		if err := each(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: reading the ledger: %w", err)
	}
	return nil
}
