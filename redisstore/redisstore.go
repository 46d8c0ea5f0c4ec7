// Package redisstore is a sluice.Limiter on Redis or Redis Cluster, so that
// one limit holds across a fleet of servers.
//
// Every decision is one server-side Lua script (scripts/<algorithm>.lua,
// embedded), run with EVALSHA and reloaded on NOSCRIPT. Each script reads
// the store's own clock (TIME), never the caller's, so servers with skewed
// clocks still share one limit; touches one key (the sliding log also a
// second in its slot while it compacts: "<key>~compact", which shares the
// key's hash tag; a key with no tag of its own compacts in place), so it
// is atomic and Cluster-safe; and sets that key to expire when its state has become
// indistinguishable from a fresh key's, so an idle client costs Redis no
// memory.
//
// Keys are "<prefix>:<algorithm>:{<key>}". The braces make the caller's key
// the Cluster hash tag, so that companion keys a future script may need land
// in the same slot. Under Config.KeyFormat KeyEnvoy, fixed windows of whole
// seconds are kept instead in envoyproxy/ratelimit's layout, one plain
// integer per window, so that both services can share one Redis during a
// rolling swap (see KeyEnvoy).
//
// Redis keeps time in microseconds (TIME), so durations in a Result are
// whole microseconds, rounded so that a wait is never reported shorter than
// it is. Lua numbers are doubles; the scripts keep their arithmetic exact
// below 2^53 (a token bucket's arrival time is kept to the nanosecond). The
// store serves every limit the memory store serves but two kinds, which
// ValidateLimit names without a connection and every call refuses with an
// error wrapping sluice.ErrInvalidLimit: periods that are not whole
// microseconds, and token buckets of more than about 2^52 units refilled
// faster than one unit per microsecond.
package redisstore

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// algorithms registers each algorithm's script, scripts/<name>.lua: the
// short name that stands for the algorithm in its keys, and the function
// that turns a limit into the script's arguments. A new algorithm is a
// script and a row here.
var algorithms = [...]struct {
	short  string
	params func(lim sluice.Limit, periodUs int64) ([]string, error)
}{
	sluice.TokenBucket:   {"tb", tokenBucketParams},
	sluice.FixedWindow:   {"fw", fixedWindowParams},
	sluice.SlidingWindow: {"sw", slidingWindowParams},
	sluice.SlidingLog:    {"sle", slidingLogParams}, // "sl" was one member per unit, "slc" MessagePack of at most 65 merged entries
	sluice.LeakyBucket:   {"lb", leakyBucketParams},
	bucketsScript:        {"swb", slidingBucketsParams},
	momentsScript:        {"swm", slidingMomentsParams},
}

// bucketsScript is the index in algorithms, scripts and batchScripts of
// the sliding window with more than one bucket (sliding_buckets.lua), kept
// under keys of its own: the one after the algorithms'. (A new algorithm
// takes its index: the array literal above then fails to compile.)
const bucketsScript = sluice.LeakyBucket + 1

// momentsScript is the index in algorithms, scripts and batchScripts of
// the sliding window with moments (sliding_moments.lua), under keys of its
// own: the one after bucketsScript.
const momentsScript = bucketsScript + 1

// scriptOf returns lim's index in algorithms: its algorithm's,
// momentsScript for a sliding window with moments, or bucketsScript for
// one with more than one bucket.
func scriptOf(lim *sluice.Limit) sluice.Algorithm {
	if lim.Moments > 0 && lim.Algorithm == sluice.SlidingWindow {
		return momentsScript
	}
	if lim.Buckets > 1 && lim.Algorithm == sluice.SlidingWindow {
		return bucketsScript
	}
	return lim.Algorithm
}

// predecessor returns the kind of the key from which the script at index
// a seeds a key it does not find, passed as its KEYS[2]: the two-window
// counter's ("sw") for the sliding window with moments, whose script
// counts what the counter counted, pinned, and deletes the counter's key
// (sliding_moments.lua), so that a rule moved to moments (the config's
// default since buckets 16, moments 2) resets no key; and the moments
// key ("swm") for the counter, the way back (a rule reloaded with
// buckets: 1; sliding_window.lua). "" for the others.
func predecessor(a sluice.Algorithm) string {
	switch a {
	case momentsScript:
		return algorithms[sluice.SlidingWindow].short
	case sluice.SlidingWindow:
		return algorithms[momentsScript].short
	}
	return ""
}

// scriptFile returns the file of the script at index a of algorithms.
func scriptFile(a sluice.Algorithm) string {
	switch a {
	case bucketsScript:
		return "sliding_buckets.lua"
	case momentsScript:
		return "sliding_moments.lua"
	}
	return a.String() + ".lua"
}

// scripts holds one loaded script per algorithm, in sluice.Algorithm order,
// then the sliding windows with buckets and with moments.
var scripts = func() []*rueidis.Lua {
	out := make([]*rueidis.Lua, len(algorithms))
	for a := range algorithms {
		out[a] = rueidis.NewLuaScript(scriptText(scriptFile(sluice.Algorithm(a))))
	}
	return out
}()

// scriptText returns the text of the script file name as it runs alone:
// prelude.lua, then the file.
func scriptText(name string) string {
	return mustRead("prelude.lua") + "\n" + mustRead(name)
}

func mustRead(name string) string {
	b, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic("redisstore: missing embedded script " + name) // a build defect, caught by every test
	}
	return string(b)
}

// DefaultPrefix is the key prefix when Config.Prefix is empty.
const DefaultPrefix = "sluice"

// Config configures a Store. Either URL or Client must be set.
type Config struct {
	// URL says where Redis is; see ParseURL for the forms.
	URL string
	// Client is an existing rueidis client to use instead of URL. The store
	// does not close it. The options that say how to connect (URL, TLS,
	// Connections, FlushDelay, Timeout, SentinelUsername,
	// SentinelPassword) are the client's own then: New refuses them.
	Client rueidis.Client
	// Prefix starts every key the store writes. Default "sluice".
	Prefix string
	// TLS configures the connections of a rediss:// URL: a private
	// certificate authority in RootCAs, client certificates. Nil means the
	// system's roots, checked against the URL's host. Ignored for redis://.
	TLS *tls.Config
	// KeyFormat says where fixed-window counters are kept. The zero value,
	// KeySluice, is Sluice's own layout; KeyEnvoy shares
	// envoyproxy/ratelimit's (see KeyEnvoy).
	KeyFormat KeyFormat
	// ExpirationJitter is, with KeyEnvoy, the most a counter's time to
	// live exceeds its period (envoyproxy/ratelimit's
	// EXPIRATION_JITTER_MAX_SECONDS): each admitted hit sets it to the
	// period plus a random whole number of seconds below ExpirationJitter,
	// so that counters written together do not all expire together. Zero:
	// no jitter. Unused with KeySluice, whose keys expire as soon as their
	// state is as good as fresh.
	ExpirationJitter time.Duration
	// Connections is the most connections to each Redis node that the
	// store pipelines its decisions over (envoyproxy/ratelimit's
	// REDIS_POOL_SIZE), rounded down to a power of two, at most 256. Zero:
	// rueidis's default (up to 4 to a single Redis or through Sentinel, 1
	// to each Cluster node).
	Connections int
	// FlushDelay is how long the store may wait after writing a pipeline
	// to gather the next one (rueidis's MaxFlushDelay; envoyproxy/ratelimit's
	// REDIS_PIPELINE_WINDOW): fewer system calls under load, for up to that
	// much latency. Zero: every command is written at once.
	FlushDelay time.Duration
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// of a redis+sentinel:// URL (envoyproxy/ratelimit's
	// REDIS_SENTINEL_AUTH); the URL's user information is for Redis
	// itself. Empty: no AUTH to the sentinels.
	SentinelUsername, SentinelPassword string
	// Timeout bounds connecting to Redis and waiting for a reply on a
	// connection (envoyproxy/ratelimit's REDIS_TIMEOUT; rueidis's
	// Dialer.Timeout and ConnWriteTimeout). Zero: rueidis's defaults (5 s
	// to connect, 10 s for replies).
	Timeout time.Duration
	// CoalesceWait, when positive, sends the decisions of concurrent
	// callers on keys of one hash slot (all keys, on a single Redis) as one
	// script call of up to 64 decisions, each made exactly as alone and
	// atomically. A decision goes alone at once when nothing of its
	// algorithm and slot is with Redis; else it joins a batch, which
	// leaves when it is full, when nothing else of its algorithm and slot
	// is with Redis, or when CoalesceWait has passed since its first
	// decision, whichever comes first. A caller whose context ends before
	// its batch leaves is dropped from it, uncounted; after, its decision
	// counts. Calendar windows and counters in envoyproxy/ratelimit's
	// layout are never coalesced. Zero: every decision is its own call.
	CoalesceWait time.Duration
}

// Store is a Redis-backed sluice.Limiter. It is safe for concurrent use;
// rueidis pipelines concurrent decisions over shared connections.
type Store struct {
	client     rueidis.Client
	ownsClient bool
	prefix     string
	clock      sluice.Clock // tests only: sent to the scripts instead of TIME
	last       atomic.Pointer[cachedParams]
	envoy      *envoyState      // nil unless Config.KeyFormat is KeyEnvoy
	batches    *coalescer       // nil unless Config.CoalesceWait is positive
	guessNow   func() time.Time // tests only: the host's clock for KeyEnvoy's guess
}

var (
	_ sluice.Limiter        = (*Store)(nil)
	_ sluice.Refunder       = (*Store)(nil)
	_ sluice.LimitValidator = (*Store)(nil)
	_ sluice.Peeker         = (*Store)(nil)
)

// New connects to Redis as cfg says and returns a Store. An unreachable
// address is an error that names it.
func New(ctx context.Context, cfg Config) (*Store, error) {
	s := &Store{client: cfg.Client, prefix: cfg.Prefix}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	switch {
	case cfg.KeyFormat == KeyEnvoy:
		if cfg.ExpirationJitter < 0 {
			return nil, fmt.Errorf("redisstore: ExpirationJitter %v is negative", cfg.ExpirationJitter)
		}
		s.envoy = newEnvoyState(cfg.ExpirationJitter)
	case cfg.KeyFormat != KeySluice:
		return nil, fmt.Errorf("redisstore: unknown %v", cfg.KeyFormat)
	}
	if cfg.CoalesceWait < 0 {
		return nil, fmt.Errorf("redisstore: CoalesceWait %v is negative", cfg.CoalesceWait)
	}
	if s.client != nil {
		if err := clientOnly(cfg); err != nil {
			return nil, err
		}
	} else {
		if cfg.URL == "" {
			return nil, errors.New("redisstore: neither URL nor Client is set")
		}
		opt, err := clientOption(cfg)
		if err != nil {
			return nil, err
		}
		c, err := rueidis.NewClient(opt)
		if err != nil {
			return nil, fmt.Errorf("redisstore: connecting to %v: %w", opt.InitAddress, err)
		}
		s.client, s.ownsClient = c, true
	}
	if err := s.client.Do(ctx, s.client.B().Ping().Build()).Error(); err != nil {
		s.Close()
		return nil, fmt.Errorf("redisstore: ping: %w", err)
	}
	if cfg.CoalesceWait > 0 {
		s.batches = newCoalescer(s.client, cfg.CoalesceWait)
	}
	return s, nil
}

// Close closes the client if the store opened it, after the decisions
// waiting to be coalesced have been answered, or failed after at most a
// second (a hung Redis does not hold Close); decisions after Close fail.
// It always returns nil.
func (s *Store) Close() error {
	if s.batches != nil {
		s.batches.close()
	}
	if s.ownsClient {
		s.client.Close()
	}
	return nil
}

// Key returns the Redis key that holds key's state under algorithm a in
// Sluice's layout, or "" for an unknown algorithm. (Under KeyEnvoy, a fixed
// window of whole seconds is kept in key followed by its window start.)
func (s *Store) Key(a sluice.Algorithm, key string) string {
	if int(a) >= len(algorithms) {
		return ""
	}
	return s.key(algorithms[a].short, key)
}

// key returns the Redis key that holds key's state of the given kind: an
// algorithm's short name, or "cc" for a concurrency limit.
func (s *Store) key(kind, key string) string {
	parts := s.keyParts(kind, key)
	return strings.Join(parts[:], "")
}

// keyParts returns the parts whose concatenation is s.key(kind, key), for
// execOnKey and the coalescer, which build the key in pooled memory.
func (s *Store) keyParts(kind, key string) [6]string {
	return [6]string{s.prefix, ":", kind, ":{", key, "}"}
}

// nowArg is the scripts' ARGV[2]: "" for the server's TIME, or the test
// clock's instant in microseconds.
func (s *Store) nowArg() string {
	if s.clock == nil {
		return ""
	}
	return strconv.FormatInt(s.clock.Now().UnixMicro(), 10)
}

// Allow is shorthand for AllowN(ctx, key, lim, 1).
func (s *Store) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return s.AllowN(ctx, key, lim, 1)
}

// AllowN spends cost units of key's allowance under lim, if they fit, in one
// round trip. The error is for bad input (see sluice.Check; also limits the
// store cannot hold exactly, see the package comment) and for Redis failing.
func (s *Store) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	return s.run(ctx, "take", key, lim, cost)
}

// RefundN gives cost units back to key's allowance under lim, never beyond a
// fresh key's.
func (s *Store) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	_, err := s.run(ctx, "refund", key, lim, cost)
	return err
}

// Peek returns key's state under lim at the server's time without spending
// (see sluice.Peeker), in one round trip: the algorithm's script in its
// read-only mode, which writes nothing, so a key never used stays absent.
// The error is for bad input and for Redis failing.
func (s *Store) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	if err := sluice.CheckPeek(key, lim); err != nil {
		return sluice.Result{}, err
	}
	return s.exec(ctx, "peek", key, lim, 0)
}

// run checks its input and runs lim's script in mode, "take" or "refund",
// with one EVALSHA.
func (s *Store) run(ctx context.Context, mode, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := sluice.Check(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	return s.exec(ctx, mode, key, lim, cost)
}

// exec runs lim's script in mode with cost, input already checked.
func (s *Store) exec(ctx context.Context, mode, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if lim.Calendar.Unit != sluice.NoCalendar {
		return s.execCalendar(ctx, mode, key, lim, cost) // calendar.go
	}
	if s.sharesEnvoyLayout(lim) {
		return s.execEnvoy(ctx, mode, key, lim, cost)
	}
	args, err := s.scriptArgs(make([]string, 0, 8), mode, lim, cost) // on the stack: room for the sliding log's 7
	if err != nil {
		return sluice.Result{}, err
	}
	// lim.Algorithm is known: s.params has checked it.
	a := scriptOf(&lim)
	parts := s.keyParts(algorithms[a].short, key)
	if s.batches != nil {
		return s.batches.do(ctx, a, args, parts[:]...)
	}
	resp := execOnKeys(ctx, s.client, scripts[a], args, predecessor(a), parts[:]...)
	return decode(resp)
}

// scriptArgs appends to args the arguments of lim's script for a decision
// in mode with cost.
func (s *Store) scriptArgs(args []string, mode string, lim sluice.Limit, cost int) ([]string, error) {
	params, err := s.params(lim)
	if err != nil {
		return nil, err
	}
	args = append(args, mode, s.nowArg())
	args = append(args, params[:2]...)
	args = append(args, strconv.Itoa(cost))
	return append(args, params[2:]...), nil
}

// cachedParams is the script arguments of the limit a store saw last.
type cachedParams struct {
	lim    sluice.Limit
	params []string
}

// params returns scriptParams(lim), from a one-entry cache when the limit is
// the one seen last (the common case: a hot policy).
func (s *Store) params(lim sluice.Limit) ([]string, error) {
	if c := s.last.Load(); c != nil && c.lim == lim {
		return c.params, nil
	}
	p, err := scriptParams(lim)
	if err != nil {
		return nil, err
	}
	s.last.Store(&cachedParams{lim: lim, params: p})
	return p, nil
}

// exact is the largest integer a Lua double holds exactly.
const exact = 1 << 53

// scriptParams returns the script arguments that describe lim: two that go
// between the instant and the cost, then any that follow the cost (the
// token bucket's unit of time, the sliding window's count-rejected flag,
// the sliding log's slot and entry bound). The error wraps
// sluice.ErrInvalidLimit if the store cannot hold lim exactly. lim must be
// valid.
func scriptParams(lim sluice.Limit) ([]string, error) {
	if lim.Period%time.Microsecond != 0 {
		return nil, fmt.Errorf("%w: redisstore keeps time in microseconds; period %v is not a whole number of them", sluice.ErrInvalidLimit, lim.Period)
	}
	if lim.Algorithm >= bucketsScript {
		return nil, fmt.Errorf("%w: unknown algorithm %v", sluice.ErrInvalidLimit, lim.Algorithm)
	}
	return algorithms[scriptOf(&lim)].params(lim, int64(lim.Period/time.Microsecond))
}

// tokenBucketParams: the interval, the burst, the interval's unit.
func tokenBucketParams(lim sluice.Limit, _ int64) ([]string, error) {
	// In nanoseconds, as the memory store, while the script's arithmetic
	// (up to 2·Burst·T) stays exact; else in microseconds, the interval
	// rounded up: never admit more.
	t := algorithm.Interval(lim)
	if int64(lim.Burst) <= exact/(2*t) {
		return []string{strconv.FormatInt(t, 10), strconv.Itoa(lim.Burst), "ns"}, nil
	}
	if t < 1000 {
		return nil, fmt.Errorf("%w: burst %d at %d per %v: a bucket of more than %d units refilled faster than one unit per microsecond is too large for redisstore", sluice.ErrInvalidLimit, lim.Burst, lim.Rate, lim.Period, exact/(2*t))
	}
	t = (t + 999) / 1000
	if int64(lim.Burst) > exact/(2*t) {
		return nil, fmt.Errorf("%w: burst %d at %d per %v is too large for redisstore", sluice.ErrInvalidLimit, lim.Burst, lim.Rate, lim.Period)
	}
	return []string{strconv.FormatInt(t, 10), strconv.Itoa(lim.Burst), "us"}, nil
}

// fixedWindowParams: the period in microseconds, the rate.
func fixedWindowParams(lim sluice.Limit, p int64) ([]string, error) {
	return []string{strconv.FormatInt(p, 10), strconv.Itoa(lim.Rate)}, nil
}

// slidingLogParams: the period, the rate, the slot in microseconds and the
// bound on entries.
func slidingLogParams(lim sluice.Limit, p int64) ([]string, error) {
	// The slot in whole microseconds, rounded up: never finer than the
	// memory store's, so never more entries. Without a precision it is one
	// microsecond, the script's clock: the log is exact.
	slot := (algorithm.LogResolution(lim) + 999) / 1000
	return []string{strconv.FormatInt(p, 10), strconv.Itoa(lim.Rate),
		strconv.FormatInt(slot, 10), strconv.Itoa(lim.LogEntries())}, nil
}

// slidingWindowParams: the period, the rate, the count-rejected flag.
func slidingWindowParams(lim sluice.Limit, p int64) ([]string, error) {
	// The script's products prev·(P−e) and (k+1)·P pass 2^53 for large
	// limits; its muldiv keeps them exact.
	countRejected := "0"
	if lim.CountRejected {
		countRejected = "1"
	}
	return []string{strconv.FormatInt(p, 10), strconv.Itoa(lim.Rate), countRejected}, nil
}

// slidingBucketsParams: the period, the rate, the count-rejected flag, the
// number of sub-windows (sluice.Limit.Validate has checked that it divides
// the period in whole microseconds).
func slidingBucketsParams(lim sluice.Limit, p int64) ([]string, error) {
	params, _ := slidingWindowParams(lim, p)
	return append(params, strconv.Itoa(int(lim.Buckets))), nil
}

// slidingMomentsParams: the period, the rate, the count-rejected flag, the
// number of sub-windows (1 for 0 or 1) and of moments (sluice.Limit.Validate
// has checked that the sub-windows divide the period in whole
// microseconds and that the rate is within sluice.MaxMomentsRate).
func slidingMomentsParams(lim sluice.Limit, p int64) ([]string, error) {
	params, _ := slidingWindowParams(lim, p)
	return append(params, strconv.Itoa(int(max(lim.Buckets, 1))), strconv.Itoa(int(lim.Moments))), nil
}

// leakyBucketParams: the milli-rate, the burst.
func leakyBucketParams(lim sluice.Limit, _ int64) ([]string, error) {
	return []string{strconv.FormatInt(algorithm.MilliRate(lim), 10), strconv.Itoa(lim.Burst)}, nil
}

// ErrReply reports a reply from Redis of a shape the store did not expect.
var ErrReply = errors.New("redisstore: unexpected reply")

// decode turns a script's reply, {allowed, remaining, retry_us, reset_us},
// into a Result. It never panics on a reply of another shape, and does not
// allocate on a well-formed one.
func decode(resp rueidis.RedisResult) (sluice.Result, error) {
	vals, err := decodeInts(resp)
	if err != nil {
		return sluice.Result{}, err
	}
	return result(vals)
}

// decodeInts returns a script's reply of four integers, without
// allocating on a well-formed one.
func decodeInts(resp rueidis.RedisResult) ([4]int64, error) {
	var vals [4]int64
	msgs, err := resp.ToArray()
	if err != nil {
		if resp.Error() == nil { // a reply came, but not an array
			return vals, fmt.Errorf("%w: %v", ErrReply, err)
		}
		return vals, fmt.Errorf("redisstore: %w", err)
	}
	if len(msgs) != 4 {
		return vals, fmt.Errorf("%w: an array of %d elements, want 4", ErrReply, len(msgs))
	}
	return decodeMessages(msgs)
}

// decodeMessages returns the four integers of a script's reply, msgs.
func decodeMessages(msgs []rueidis.RedisMessage) ([4]int64, error) {
	var vals [4]int64
	for i := range msgs {
		v, err := msgs[i].AsInt64()
		if err != nil {
			return vals, fmt.Errorf("%w: element %d: %v", ErrReply, i, err)
		}
		vals[i] = v
	}
	return vals, nil
}

// result turns a script's reply, {allowed, remaining, retry_us, reset_us},
// into a Result, or an error wrapping ErrReply for values out of range.
func result(vals [4]int64) (sluice.Result, error) {
	if vals[0] < 0 || vals[0] > 1 || vals[1] < 0 || vals[2] < 0 || vals[3] < 0 {
		return sluice.Result{}, fmt.Errorf("%w: %v", ErrReply, vals)
	}
	return sluice.Result{
		Allowed:    vals[0] == 1,
		Remaining:  int(vals[1]),
		RetryAfter: time.Duration(vals[2]) * time.Microsecond,
		ResetAfter: time.Duration(vals[3]) * time.Microsecond,
	}, nil
}

// ValidateLimit reports whether a Store can serve lim: nil for every limit
// it serves exactly as the memory store does (up to its microsecond clock),
// else an error wrapping sluice.ErrInvalidLimit that says why. It needs no
// connection, so a configuration can be checked before Redis is reached.
// The limits that pass Limit.Validate and that a Store refuses are periods
// that are not a whole number of microseconds, and token buckets of more
// than 2^52/Interval units refilled faster than one unit per microsecond.
func ValidateLimit(lim sluice.Limit) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	_, err := scriptParams(lim)
	return err
}

// ValidateLimit is the package's ValidateLimit: it implements
// sluice.LimitValidator.
func (s *Store) ValidateLimit(lim sluice.Limit) error { return ValidateLimit(lim) }
