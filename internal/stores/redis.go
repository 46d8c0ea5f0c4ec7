package stores

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/ratelimitenv"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/relief"
	"github.com/sluicehq/sluice/service"
)

// defaultJitter is envoyproxy/ratelimit's EXPIRATION_JITTER_MAX_SECONDS
// default, in seconds.
const defaultJitter = 300

// redisTuning is one store's share of envoyproxy/ratelimit's variables:
// the main store's REDIS_*, or the per-second store's REDIS_PERSECOND_*.
type redisTuning struct {
	pool    int           // REDIS_POOL_SIZE: redisstore.Config.Connections
	window  time.Duration // REDIS_PIPELINE_WINDOW: FlushDelay
	timeout time.Duration // REDIS_TIMEOUT: Timeout
}

// read reads the tuning variables that start with prefix.
func (t *redisTuning) read(prefix string, errs *envflag.Errs) {
	t.pool = errs.Int(prefix+"POOL_SIZE", 0)
	t.window = errs.Duration(prefix+"PIPELINE_WINDOW", 0)
	t.timeout = errs.Duration(prefix+"TIMEOUT", 0)
}

// DefaultCoalesceWait is -redis-coalesce-wait's default: concurrent
// decisions on one hash slot share a script call, each made exactly as it
// would be alone (no accuracy lost), a decision waiting at most this long
// for others and not at all while no call of its kind is with Redis.
const DefaultCoalesceWait = 200 * time.Microsecond

// givenDuration is a duration flag that records whether it was given.
type givenDuration struct {
	d   *time.Duration
	set *bool
}

func (g givenDuration) String() string {
	if g.d == nil {
		return ""
	}
	return g.d.String()
}

func (g givenDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	*g.d, *g.set = d, true
	return nil
}

// RedisOptions are serve's Redis settings beyond -store and -prefix: the
// key format, the per-second store and the variables of
// envoyproxy/ratelimit's that tune the connections.
type RedisOptions struct {
	keyFormat string        // -redis-key-format
	PerSecond string        // -store-per-second; "" is none
	jitter    int           // EXPIRATION_JITTER_MAX_SECONDS
	coalesce  time.Duration // -redis-coalesce-wait: redisstore.Config.CoalesceWait
	// coalesceSet says -redis-coalesce-wait was given: its default is
	// refused by no store, a value given is refused without Redis.
	coalesceSet bool

	main, second redisTuning
}

// Flags defines -redis-key-format and -store-per-second on fs and reads
// the variables, their malformed values going to errs.
func (o *RedisOptions) Flags(fs *flag.FlagSet, errs *envflag.Errs) {
	errs.Bools("REDIS_PERSECOND", "REDIS_PERSECOND_TLS", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")
	fs.StringVar(&o.keyFormat, "redis-key-format", envflag.String("REDIS_KEY_FORMAT", "sluice"),
		"with Redis, where fixed windows count: sluice (Sluice's keys), or envoy (envoyproxy/ratelimit's keys and CACHE_KEY_PREFIX, so that both can share one Redis during a rolling swap; see docs/serve.md)")
	perSecond := ""
	if envflag.Bool("REDIS_PERSECOND", false) {
		if perSecond = RedisURLFromEnv("REDIS_PERSECOND_"); perSecond == "" {
			*errs = append(*errs, errors.New("REDIS_PERSECOND=true needs REDIS_PERSECOND_URL: the per-second Redis"))
		}
	}
	fs.StringVar(&o.PerSecond, "store-per-second", perSecond,
		"with Redis, a second Redis URL for the limits whose period is under a minute (REDIS_PERSECOND); default: none, every limit on -store")
	o.coalesce = DefaultCoalesceWait
	fs.Var(givenDuration{&o.coalesce, &o.coalesceSet}, "redis-coalesce-wait",
		"with Redis, send concurrent decisions on one hash slot as one script call, a decision waiting at most this long for others (none while nothing else is with Redis); 0: one call per decision (see docs/serve.md)")
	o.jitter = errs.Int("EXPIRATION_JITTER_MAX_SECONDS", defaultJitter)
	o.main.read("REDIS_", errs)
	o.second.read("REDIS_PERSECOND_", errs)
}

// Check refuses settings that cannot act with -store store: an unknown
// key format, the envoy key format or a per-second store without Redis,
// a per-second URL that does not parse, negative numbers.
func (o *RedisOptions) Check(store string) error {
	f, err := redisstore.ParseKeyFormat(o.keyFormat)
	if err != nil {
		return fmt.Errorf("-redis-key-format (REDIS_KEY_FORMAT): %w", err)
	}
	if Is(store, Memory) {
		if f == redisstore.KeyEnvoy {
			return errors.New("-redis-key-format envoy: the memory store has no Redis keys; set -store (REDIS_URL)")
		}
		if o.PerSecond != "" {
			return errors.New("-store-per-second (REDIS_PERSECOND): needs a Redis -store (REDIS_URL) for the other limits")
		}
	}
	switch {
	case o.coalesce < 0:
		return fmt.Errorf("-redis-coalesce-wait %v: want 0 or more", o.coalesce)
	case o.coalesceSet && o.coalesce != 0 && !Is(store, Redis):
		return errors.New("-redis-coalesce-wait: needs a Redis -store (REDIS_URL)")
	}
	if o.PerSecond != "" {
		if _, err := redisstore.ParseURL(o.PerSecond); err != nil {
			return fmt.Errorf("-store-per-second (REDIS_PERSECOND_URL): %w", err)
		}
	}
	for _, v := range []struct {
		name string
		n    int64
	}{
		{"EXPIRATION_JITTER_MAX_SECONDS", int64(o.jitter)},
		{"REDIS_POOL_SIZE", int64(o.main.pool)}, {"REDIS_PERSECOND_POOL_SIZE", int64(o.second.pool)},
		{"REDIS_PIPELINE_WINDOW", int64(o.main.window)}, {"REDIS_PERSECOND_PIPELINE_WINDOW", int64(o.second.window)},
		{"REDIS_TIMEOUT", int64(o.main.timeout)}, {"REDIS_PERSECOND_TIMEOUT", int64(o.second.timeout)},
	} {
		if v.n < 0 {
			return fmt.Errorf("%s=%s: want 0 or more", v.name, os.Getenv(v.name))
		}
	}
	return nil
}

// ServiceKeyFormat is the service's key format for -redis-key-format: the
// envoy layout's keys spell values raw.
func (o *RedisOptions) ServiceKeyFormat() service.KeyFormat {
	if f, _ := redisstore.ParseKeyFormat(o.keyFormat); f == redisstore.KeyEnvoy {
		return service.KeyEnvoy
	}
	return service.KeySluice
}

// Configs returns the configs of the store at mainURL and of the
// per-second store (nil without -store-per-second). The TLS files are
// read here: a file that cannot be used is an error.
func (o *RedisOptions) Configs(mainURL string) (main redisstore.Config, perSecond *redisstore.Config, err error) {
	f, err := redisstore.ParseKeyFormat(o.keyFormat)
	if err != nil {
		return main, nil, err
	}
	base := redisstore.Config{KeyFormat: f, CoalesceWait: o.coalesce}
	if f == redisstore.KeyEnvoy {
		base.ExpirationJitter = time.Duration(o.jitter) * time.Second
	}
	if files := tlsFilesFromEnv(); files != (redisstore.TLSFiles{}) && anyTLS(mainURL, o.PerSecond) {
		if base.TLS, err = redisstore.LoadTLS(files); err != nil {
			return main, nil, err
		}
	}
	main = o.main.config(base, mainURL, os.Getenv("REDIS_SENTINEL_AUTH"))
	if o.PerSecond != "" {
		ps := o.second.config(base, o.PerSecond, os.Getenv("REDIS_PERSECOND_SENTINEL_AUTH"))
		perSecond = &ps
	}
	return main, perSecond, nil
}

// config returns base for the store at u with t's tuning and the
// sentinels' auth, "password" or "user:password".
func (t redisTuning) config(base redisstore.Config, u, sentinelAuth string) redisstore.Config {
	c := base
	c.URL, c.Connections, c.FlushDelay, c.Timeout = u, t.pool, t.window, t.timeout
	if sentinelAuth != "" && isSentinel(u) {
		user, pass, ok := strings.Cut(sentinelAuth, ":")
		if !ok {
			user, pass = "", sentinelAuth
		}
		c.SentinelUsername, c.SentinelPassword = user, pass
	}
	return c
}

// tlsFilesFromEnv is REDIS_TLS_CLIENT_CERT, _KEY, _CACERT and
// REDIS_TLS_SKIP_HOSTNAME_VERIFICATION, shared by both stores as in
// envoyproxy/ratelimit.
func tlsFilesFromEnv() redisstore.TLSFiles {
	return redisstore.TLSFiles{
		CertFile: os.Getenv("REDIS_TLS_CLIENT_CERT"), KeyFile: os.Getenv("REDIS_TLS_CLIENT_KEY"),
		CAFile: os.Getenv("REDIS_TLS_CACERT"), SkipHostnameVerification: envflag.Bool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false),
	}
}

// anyTLS reports whether any of the URLs is rediss.
func anyTLS(urls ...string) bool {
	for _, u := range urls {
		if strings.HasPrefix(u, "rediss://") || strings.HasPrefix(u, "rediss+") {
			return true
		}
	}
	return false
}

// isSentinel reports whether u is a redis+sentinel or rediss+sentinel URL.
func isSentinel(u string) bool {
	scheme, _, _ := strings.Cut(u, "://")
	return strings.HasSuffix(scheme, "+sentinel")
}

// NotActedOn returns the Redis variables that are set (not empty) and that
// serve does not act on with the stores given, each as "NAME (why)" or
// "NAME=value (why)", for the start-up line (whose list is comma-separated:
// no why has a comma).
func (o *RedisOptions) NotActedOn(store string) []string {
	var out []string
	name := func(n, why string) {
		if os.Getenv(n) != "" {
			out = append(out, n+" ("+why+")")
		}
	}
	valued := func(n, ok, why string) {
		if v := os.Getenv(n); v != "" && !envflag.SameValue(strings.TrimSpace(v), ok) {
			out = append(out, n+"="+v+" ("+why+")")
		}
	}
	if Is(store, Memory) {
		for _, n := range ratelimitenv.Names(ratelimitenv.MainRedis) {
			name(n, "the store is memory")
		}
	} else {
		tuningNotActedOn("REDIS_", name, valued)
		if !anyTLS(store, o.PerSecond) {
			for _, n := range []string{"REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_CACERT", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"} {
				name(n, "no store is rediss://: REDIS_TLS is false")
			}
		}
		if !isSentinel(store) {
			name("REDIS_SENTINEL_AUTH", "the store is not redis+sentinel://")
		}
		for _, n := range []string{"REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"} {
			name(n, "serve starts without Redis (the failure mode answers) and reconnects by itself: 0.5 s doubling to 30 s for ever")
		}
		if f, _ := redisstore.ParseKeyFormat(o.keyFormat); f != redisstore.KeyEnvoy {
			name("EXPIRATION_JITTER_MAX_SECONDS", "only -redis-key-format envoy keys take a jitter; Sluice's expire when their state is as good as fresh")
		}
	}
	o.perSecondNotActedOn(store, name, valued)
	return out
}

// tuningNotActedOn names the variables with prefix that rueidis has no
// knob for, when set to another value than their default.
func tuningNotActedOn(prefix string, name func(n, why string), valued func(n, ok, why string)) {
	valued(prefix+"PIPELINE_LIMIT", "0", "rueidis flushes a pipeline by its buffer and the pipeline window: never after a count of commands")
	name(prefix+"CLUSTER_PIPELINE_PARALLELISM", "rueidis writes to every Cluster node at once on its own connections")
	valued(prefix+"POOL_ON_EMPTY_BEHAVIOR", "WAIT", "rueidis queues commands on pipelined connections that never run out: WAIT is what it does")
}

// perSecondNotActedOn names the REDIS_PERSECOND_ variables: all of them
// without a per-second store; with one given by -store-per-second rather
// than REDIS_PERSECOND, those that would have built its URL; and those
// rueidis has no knob for.
func (o *RedisOptions) perSecondNotActedOn(store string, name func(n, why string), valued func(n, ok, why string)) {
	url, tuning := ratelimitenv.Names(ratelimitenv.PerSecondURL), ratelimitenv.Names(ratelimitenv.PerSecondTuning)
	why := ""
	switch {
	case Is(store, Memory):
		why = "the store is memory"
	case o.PerSecond == "":
		why = "REDIS_PERSECOND is not true"
	}
	if why != "" {
		for _, n := range append(url, tuning...) {
			name(n, why)
		}
		return
	}
	if !envflag.Bool("REDIS_PERSECOND", false) {
		for _, n := range url {
			name(n, "-store-per-second is given")
		}
	}
	tuningNotActedOn("REDIS_PERSECOND_", name, valued)
	valued("REDIS_PERSECOND_SOCKET_TYPE", "tcp", "Sluice speaks TCP to Redis only")
	if !isSentinel(o.PerSecond) {
		name("REDIS_PERSECOND_SENTINEL_AUTH", "the per-second store is not redis+sentinel://")
	}
}

// RedisURLFromEnv returns the Redis URL that envoyproxy/ratelimit's
// variables with prefix ("REDIS_" or "REDIS_PERSECOND_") name, or "" when
// prefix+URL is unset: the URL, which when it is envoyproxy/ratelimit's
// host:port (not a URL) becomes one, with scheme rediss when prefix+TLS is
// true, and redis+cluster or redis+sentinel per prefix+TYPE (a sentinel URL
// is "master,host:port,host:port"); prefix+AUTH, "password" or
// "user:password", becomes the URL's user information unless the URL has
// one.
func RedisURLFromEnv(prefix string) string {
	u := os.Getenv(prefix + "URL")
	if u == "" {
		return ""
	}
	if !strings.Contains(u, "://") {
		scheme := "redis"
		if envflag.Bool(prefix+"TLS", false) {
			scheme = "rediss"
		}
		switch strings.ToLower(os.Getenv(prefix + "TYPE")) {
		case "cluster":
			scheme += "+cluster"
		case "sentinel":
			scheme += "+sentinel"
			if master, hosts, ok := strings.Cut(u, ","); ok {
				u = hosts + "/" + master
			}
		}
		u = scheme + "://" + u
	}
	if auth := os.Getenv(prefix + "AUTH"); auth != "" {
		scheme, rest, _ := strings.Cut(u, "://")
		authority := rest
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			authority = rest[:i]
		}
		if !strings.Contains(authority, "@") {
			user, pass, ok := strings.Cut(auth, ":")
			if !ok {
				user, pass = "", auth
			}
			u = scheme + "://" + url.UserPassword(user, pass).String() + "@" + rest
		}
	}
	return u
}

// RedisStores are the Redis stores serve decides on: the main store, and
// with -store-per-second the split between it and the per-second store.
type RedisStores struct {
	Limiter   sluice.Limiter
	Close     func()
	Connected func() bool // both stores have answered once (see redisstore.Lazy)
	// Roster returns the membership set of the fleet called name on the
	// main store (not the per-second one): see relief.Fleet.
	Roster func(name string) relief.Roster
}

// OpenRedis opens the Redis store at store with o's settings (nil: the
// URL's alone) and, with -store-per-second, the per-second store and the
// split between them (see relief.PeriodSplit). Either Redis being down is
// no error (see redisstore.OpenLazy).
func OpenRedis(ctx context.Context, store string, o *RedisOptions, log *slog.Logger) (RedisStores, error) {
	main, perSecond := redisstore.Config{URL: store}, (*redisstore.Config)(nil)
	if o != nil {
		var err error
		if main, perSecond, err = o.Configs(store); err != nil {
			return RedisStores{}, err
		}
	}
	rs, err := redisstore.OpenLazy(ctx, main, log)
	if err != nil {
		return RedisStores{}, err
	}
	if perSecond == nil {
		return RedisStores{Limiter: rs, Close: func() { rs.Close() }, Connected: rs.Connected, Roster: roster(rs)}, nil
	}
	ps, err := redisstore.OpenLazy(ctx, *perSecond, log.With("store", "per-second"))
	if err != nil {
		rs.Close()
		return RedisStores{}, fmt.Errorf("-store-per-second: %w", err)
	}
	log.Info("limits whose period is under a minute are on the per-second store", "store", Name(perSecond.URL))
	return RedisStores{Limiter: relief.NewPeriodSplit(rs, ps), Close: func() { rs.Close(); ps.Close() },
		Connected: func() bool { return rs.Connected() && ps.Connected() }, Roster: roster(rs)}, nil
}

// roster returns the Roster of a fleet on l.
func roster(l *redisstore.Lazy) func(string) relief.Roster {
	return func(name string) relief.Roster { return l.Roster(name) }
}
