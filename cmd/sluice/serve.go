package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/bodyrate"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/ratelimitenv"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// exampleConfig is what `sluice serve` runs with no config at all.
//
//go:embed example.yaml
var exampleConfig []byte

// mootFlags returns the settings of o that its store makes moot, as flag
// names: with the memory store, which never fails, -local-cache,
// -health-needs-store and an explicit -failure-mode, -store-timeout or -failure-nodes
// (flags or their environment variables); with Redis or PostgreSQL, an
// explicit -memory-clock-resolution (-memory-max-bytes is then the budget
// of failure mode local's store).
func mootFlags(fs *flag.FlagSet, o *serveOptions) []string {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var out []string
	// Given: set on the command line or by the variable that feeds it.
	_, memEnv := os.LookupEnv("MEMSTORE_MAX_BYTES")
	// -local-cache is on by default: given when set or turned on by its variable.
	set["local-cache"] = o.localCache && (set["local-cache"] || strings.TrimSpace(os.Getenv("LOCAL_CACHE_SIZE_IN_BYTES")) != "")
	set["health-needs-store"] = o.healthNeedsStore
	set["memory-max-bytes"] = set["memory-max-bytes"] || memEnv
	kind, err := stores.Of(o.store)
	if err != nil {
		return nil // refused by checkOptions
	}
	for _, f := range kind.Moot {
		if set[f] {
			out = append(out, "-"+f)
		}
	}
	// SLUICE_FLEET where no fleet is counted (-fleet given there is refused
	// by checkFleet).
	_, fleetEnv := os.LookupEnv("SLUICE_FLEET")
	if fleetEnv && !set["fleet"] && !o.remote.countsFleet(kind) {
		out = append(out, "-fleet")
	}
	return out
}

// serveOptions are serve's settings, from flags over envoyproxy/ratelimit's
// environment variables over defaults.
type serveOptions struct {
	configPath, store, httpAddr, grpcAddr, headers, prefix, failure string
	policyNames                                                     string // -header-policy-names
	failureNodes                                                    int    // -failure-nodes: failsafe.Config.Nodes; 0: -local-share's, else 1
	logLevel, logFormat, trustedProxies                             string
	shadow, watch, localCache, healthNeedsStore                     bool
	allowRefunds                                                    bool // -allow-refunds: is_negative_hits gives back
	listen                                                          daemon.ListenerOptions
	maxDetailed                                                     int
	maxOverride, maxCost, maxDescs, maxEntries                      int
	memMaxBytes, jsonInFlight                                       int64
	localCacheBytes                                                 int64 // LOCAL_CACHE_SIZE_IN_BYTES above 0: the over-limit cache's budget
	jsonPerPeer, jsonMinRate                                        int64
	memClock                                                        time.Duration       // -memory-clock-resolution
	redis                                                           stores.RedisOptions // -redis-key-format, -store-per-second, REDIS_* tuning
	remote                                                          remoteOptions       // -migrate, -reserve-units, -reserve-hold, -local-share (pgstore.go)
	admin                                                           adminOptions        // -admin-*, -plans* (adminlisten.go)
	rlqs                                                            rlqsOptions         // -rlqs-* (rlqs.go)

	// forceStart and healthNeedsConfig are envoyproxy/ratelimit's
	// FORCE_START_WITHOUT_INITIAL_CONFIG and
	// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED (-start-without-config,
	// -health-needs-config).
	forceStart, healthNeedsConfig bool

	// rules are envoyproxy/ratelimit's settings of how rules act:
	// QUOTA_MODE, RESPONSE_DYNAMIC_METADATA, NEAR_LIMIT_RATIO,
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT and (for loading)
	// MERGE_DOMAIN_CONFIG.
	rules ruleOptions
}

// redisFromEnv returns the store that envoyproxy/ratelimit's variables
// name: "memory" without REDIS_URL; else REDIS_URL, which when it is
// envoyproxy/ratelimit's host:port (not a URL) becomes one, with scheme
// rediss when REDIS_TLS is true, and redis+cluster or redis+sentinel per
// REDIS_TYPE (a sentinel REDIS_URL is "master,host:port,host:port");
// REDIS_AUTH, "password" or "user:password", becomes the URL's user
// information unless the URL has one.
func redisFromEnv() string {
	if u := stores.RedisURLFromEnv("REDIS_"); u != "" {
		return u
	}
	return "memory"
}

// serveUsage is serve's -h.
var serveUsage = usage{
	synopsis: "sluice serve [flags]",
	about: `Serve runs the rate limit service: Envoy's RateLimitService v3 over gRPC,
and the same call as JSON (POST /json), /healthcheck, /metrics and forward
auth (/auth) over HTTP. It reads envoyproxy/ratelimit's YAML config and
environment variables (docs/serve.md lists them; they set the flags'
defaults). With no flags it serves the built-in example config on the
memory store. SIGHUP reloads the config; SIGTERM drains and stops.`,
	examples: []string{
		"sluice serve",
		"sluice serve -config /etc/ratelimit/config -store redis://redis:6379 -failure-mode open",
		"sluice serve -config /etc/ratelimit/config -store postgres://sluice@db:5432/sluice -reserve-units 20",
	},
}

// runServe runs the service until ctx ends, then drains it: in-flight
// requests finish (for up to 10 seconds) before it returns. It runs the
// steps of the app lifecycle (see daemon.App) with serve's parts; each step of
// serveApp.start is the one place for its kind of change.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := daemon.NewApp(stderr, "sluice serve:") // first: SIGHUP during start-up must not kill serve
	defer a.Close()
	s, code, done := parseServeFlags(args, stdout, stderr)
	if done {
		return code
	}
	if err := s.start(ctx, a, stdout); err != nil {
		return a.Exit(err)
	}
	return a.Run(ctx)
}

// serveApp is serve's parts, as its start-up steps open them.
type serveApp struct {
	o         serveOptions
	fs        *flag.FlagSet // tells flags set from defaults (mootFlags, watchRoots)
	defConfig string        // -config's default (RUNTIME_ROOT)
	envErr    envflag.Errs  // environment variables that do not parse
	xds       *xdsSettings  // CONFIG_TYPE=GRPC_XDS_SOTW's; nil for files

	log         *slog.Logger
	trusted     []netip.Prefix // -trusted-proxies
	sum         [sha256.Size]byte
	rules       *config.Config // the config at start-up
	validate    func(sluice.Limit) error
	headers     service.HeaderMode
	policyNames service.PolicyNames // -header-policy-names
	st          stores.Opened
	reg         *prometheus.Registry
	svc         *service.Service
	auth        *authEndpoint
	rlqs        *rlqsFace // Envoy's rate limit quota service (cmd/sluice/rlqs.go)

	httpLn, grpcLn net.Listener
	admin          adminParts // the plans' tenant lookup (adminlisten.go)

	grpcTLS *daemon.GRPCTLS     // -grpc-tls's; nil: plaintext gRPC
	debug   *daemon.DebugServer // -debug-addr's; nil: none

	telSet telemetry.Settings // TRACING_*, USE_STATSD and the rest
	tel    *telemetry.Telemetry

	known bool // sum is the fingerprint of the config files
	// hasConfig is whether the running config has a domain (see
	// -health-needs-config).
	hasConfig atomic.Bool
	// running is the config apply swapped in last; nil: rules's (see
	// runningRules).
	running atomic.Pointer[config.Config]
}

// start opens serve's parts and starts its listeners, step by step; a
// step's error ends serve (see daemon.App.Exit). The steps, in order:
//
//   - checkOptions: settings refused at start-up (exit 2), and the logger;
//   - loadConfig: the config at start-up;
//   - openStore: the store;
//   - serviceConfig: service.Config from the settings (a new setting of
//     the service goes there);
//   - configSource: how the config is reloaded (the files' reloader and
//     their watch; another source of config, such as xDS, replaces it);
//   - grpcServerOptions: the gRPC server's options;
//   - listen and startServers: the listeners (an extra one, such as a
//     debug listener, is opened and served there too);
//   - telemetry: set up before the service is built, its shutdown
//     registered with a.OnClose (run after the drain).
func (s *serveApp) start(ctx context.Context, a *daemon.App, stdout io.Writer) error {
	if err := s.checkOptions(); err != nil {
		return err
	}
	a.Log = s.log
	if err := s.loadConfig(ctx); err != nil {
		return err
	}
	if err := s.openStore(ctx); err != nil {
		return err
	}
	a.OnClose(func() {
		ctx, cancel := a.CloseContext()
		defer cancel()
		s.st.Shutdown(ctx)
	})
	if err := s.startRLQS(ctx, a); err != nil {
		return err
	}
	if err := s.openAdmin(ctx, a); err != nil {
		return err
	}
	if err := s.startTelemetry(ctx, a); err != nil {
		return err
	}
	svc, err := service.New(s.withAdmin(s.serviceConfig()))
	if err != nil {
		return err
	}
	s.svc = svc
	s.serviceStarted(svc)
	a.OnClose(func() { svc.Close() })
	if err := s.tel.Attach(svc, s.telSet); err != nil {
		return err
	}
	if s.xds == nil && s.rules != nil {
		svc.ConfigLoaded(nil) // the files loadConfig loaded, before statsd was attached
	}
	s.auth = &authEndpoint{svc: svc, trusted: s.trusted}
	if err := s.auth.set(s.rules); err != nil {
		return err
	}
	rl, err := s.configSource()
	if err != nil {
		return err
	}
	a.ReloadWith(rl, s.configName())
	if s.xds != nil {
		s.xds.forceStart = s.o.forceStart // -start-without-config over the variable
		if err := s.startXDS(ctx, a); err != nil {
			return err
		}
	}
	if err := s.listen(ctx, a); err != nil {
		return err
	}
	s.startServers(a)
	// And on file change, with the watches in place before the addresses
	// are printed too.
	if s.o.watch {
		a.Watch(ctx, s.o.configPath, ratelimitenv.RuntimeWatchRoots(envflag.IsSet(s.fs, "config"), s.o.configPath), "config files")
	}
	s.printBanner(stdout)
	// Drain: the health checks fail first, then both listeners close.
	a.OnDrain(func() { svc.SetServing(false) })
	return nil
}

// parseServeFlags reads serve's command line over envoyproxy/ratelimit's
// environment variables; done is true when serve is to end with code
// (-h, or a flag that does not parse).
func parseServeFlags(args []string, stdout, stderr io.Writer) (s *serveApp, code int, done bool) {
	s = &serveApp{defConfig: ratelimitenv.RuntimeConfigDir()}
	o, envErr := &s.o, &s.envErr
	envErr.Bools("REDIS_TLS", "SHADOW_MODE", "LIMIT_RESPONSE_HEADERS_ENABLED", "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "RUNTIME_WATCH_ROOT",
		"FORCE_START_WITHOUT_INITIAL_CONFIG", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED")
	fs := flag.NewFlagSet("sluice serve", flag.ContinueOnError)
	s.fs = fs
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", s.defConfig, "a config file or directory (envoyproxy/ratelimit's YAML); default: the built-in example")
	fs.StringVar(&o.store, "store", redisFromEnv(), "memory, a Redis URL (redis://, rediss://, redis+cluster://, redis+sentinel://), or a PostgreSQL URL (postgres://, postgresql://: fixed-window quotas, durable)")
	fs.StringVar(&o.httpAddr, "http-addr", net.JoinHostPort(envflag.String("HOST", ""), envflag.String("PORT", "8080")), "HTTP address: POST /json, /healthcheck, /metrics")
	fs.StringVar(&o.grpcAddr, "grpc-addr", net.JoinHostPort(envflag.String("GRPC_HOST", ""), envflag.String("GRPC_PORT", "8081")), "gRPC address: envoy.service.ratelimit.v3.RateLimitService")
	fs.StringVar(&o.headers, "headers", ratelimitenv.HeadersDefault(), "response_headers_to_add: off, legacy or draft-11 (default: SLUICE_HEADERS; else legacy when LIMIT_RESPONSE_HEADERS_ENABLED is true, off when it is false or envoyproxy/ratelimit's deployment variables are set, else draft-11)")
	fs.StringVar(&o.policyNames, "header-policy-names", envflag.String("SLUICE_HEADER_POLICY_NAMES", "rule"), "what RateLimit-Policy and RateLimit (and forward auth's X-RateLimit-Reason) call a limit: rule (its rule's name, else its descriptor path), hash (r and 12 hex digits of the SHA-256 of that) or index (its position in RateLimit-Policy)")
	fs.StringVar(&o.prefix, "prefix", envflag.String("CACHE_KEY_PREFIX", ""), "prefix of every store key")
	fs.StringVar(&o.failure, "failure-mode", stores.DefaultFailureMode, "with Redis or PostgreSQL, what to do when it fails: local (each process decides its share of each limit in memory, see -failure-nodes), closed or open (admit) (unset on PostgreSQL: closed)")
	stores.FailureNodesFlag(fs, &o.failureNodes)
	// Read once: unset (or malformed or negative, recorded) is
	// math.MinInt, the cache on with relief's default budget; 0 turns it
	// off.
	cacheSize := envErr.Int("LOCAL_CACHE_SIZE_IN_BYTES", math.MinInt)
	if cacheSize < 0 && cacheSize != math.MinInt {
		*envErr = append(*envErr, fmt.Errorf("LOCAL_CACHE_SIZE_IN_BYTES=%d: want 0 (the over-limit cache off) or its budget in bytes", cacheSize))
		cacheSize = math.MinInt
	}
	o.localCacheBytes = int64(max(cacheSize, 0))
	fs.BoolVar(&o.localCache, "local-cache", cacheSize > 0 || cacheSize == math.MinInt, "with Redis or PostgreSQL, answer keys known to be over their limit from memory until their retry-after, asking the store again at least every second (no round trip; never admits over the limit); default on, off when LOCAL_CACHE_SIZE_IN_BYTES is 0, which above 0 is its budget in bytes (default 32 MiB)")
	fs.BoolVar(&o.healthNeedsStore, "health-needs-store", envflag.Bool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false), "with Redis, /healthcheck and gRPC health report NOT_SERVING (503) while Redis is unreachable or failing; default: they report the process, which applies the failure mode")
	fs.BoolVar(&o.healthNeedsConfig, "health-needs-config", envflag.Bool("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false), "/healthcheck and gRPC health report NOT_SERVING (503) while no config with a domain runs (see -start-without-config)")
	fs.BoolVar(&o.forceStart, "start-without-config", envflag.Bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false), "start even when the config does not load (a broken or missing file): no rule applies until a reload loads it; default: exit status 1")
	fs.BoolVar(&o.shadow, "shadow", envflag.Bool("SHADOW_MODE", false), "shadow mode: decide and count, never refuse")
	envErr.Bools("ALLOW_REFUNDS")
	fs.BoolVar(&o.allowRefunds, "allow-refunds", envflag.Bool("ALLOW_REFUNDS", false),
		"a descriptor with is_negative_hits gives its hits_addend back to its key (never above a fresh key's allowance); default: it spends hits_addend, as envoyproxy/ratelimit counts it. Only for callers trusted to refund what they spent")
	fs.StringVar(&o.logLevel, "log-level", envflag.String("LOG_LEVEL", "info"), "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", envflag.String("LOG_FORMAT", "text"), "log format: text, or json (envoyproxy/ratelimit's keys: @timestamp, @message, level)")
	fs.BoolVar(&o.watch, "watch", true, "reload the config when its files change (SIGHUP always reloads)")
	fs.StringVar(&o.trustedProxies, "trusted-proxies", "", "the reverse proxies that call /auth, whose X-Forwarded-For is believed: comma-separated networks or addresses, added to the config's forward_auth trusted_proxies")
	o.listen.Flags(fs, envErr)
	o.redis.Flags(fs, envErr)
	o.remote.flags(fs)
	o.admin.flags(fs)
	o.rlqs.flags(fs, envErr)
	envErr.SizeVar(fs, &o.memMaxBytes, "memory-max-bytes", "MEMSTORE_MAX_BYTES", memstore.DefaultMaxBytes,
		"the memory store's budget in bytes, or k, m or g (such as 256m) (keys, states, sliding log entries); at it, keys are evicted (sluice_memstore_evictions_total); with Redis or PostgreSQL, the budget of the store failure mode local decides on while the store fails")
	fs.DurationVar(&o.memClock, "memory-clock-resolution", 0,
		"with the memory store, read a coarse clock refreshed every this long (10µs to 10ms, such as 100us) instead of the exact clock at each decision: cheaper decisions, refills and window ends up to this late, and a thread that wakes every this long; 0: exact")
	fs.IntVar(&o.maxOverride, "max-override", envErr.Int("MAX_OVERRIDE", 0),
		"the largest requests_per_unit a descriptor's limit override may ask for; larger is refused (400, InvalidArgument); 0: no maximum")
	fs.IntVar(&o.maxCost, "max-cost", envErr.Int("MAX_COST", 0),
		"the largest hits_addend a request or descriptor may ask for; larger is refused (400, InvalidArgument); 0: no maximum")
	envErr.SizeVar(fs, &o.jsonInFlight, "json-max-bytes-in-flight", "JSON_MAX_BYTES_IN_FLIGHT", service.DefaultMaxJSONBytesInFlight,
		"POST /json: the request bodies being read, all together, at most this many bytes, or k, m or g (such as 128m); past it, 503 with Retry-After")
	envErr.SizeVar(fs, &o.jsonPerPeer, "json-max-bytes-per-peer", "JSON_MAX_BYTES_PER_PEER", 0,
		"POST /json: the request bodies being read from one peer address (an IPv6 one by its /64) at most this many bytes (such as 8m); past it, that peer's body is 503 with Retry-After; 0: a sixteenth of -json-max-bytes-in-flight, at least 1m")
	envErr.SizeVar(fs, &o.jsonMinRate, "json-body-min-rate", "JSON_BODY_MIN_RATE", bodyrate.DefaultMinRate,
		"POST /json: the least average rate of a body past its first 10s, bytes per second (such as 1k); slower is 408; 0: off")
	fs.IntVar(&o.maxDescs, "max-descriptors", envErr.Int("MAX_DESCRIPTORS", service.DefaultMaxDescriptors),
		"the most descriptors a request may carry; more is refused (400, InvalidArgument)")
	fs.IntVar(&o.maxEntries, "max-entries", envErr.Int("MAX_ENTRIES", service.DefaultMaxEntries),
		"the most entries a descriptor may carry; more is refused (400, InvalidArgument)")
	fs.IntVar(&o.maxDetailed, "detailed-metric-max-series", envErr.Int("DETAILED_METRIC_MAX_SERIES", service.DefaultMaxDetailedSeries),
		"metrics series per detailed_metric rule at most (one per descriptor); past them, the rule's FULLKEY#other series counts")
	o.rules = readRuleOptions(envErr)
	s.xds = xdsFromEnv(envErr)
	s.telSet = telemetry.FromEnv(envErr)
	code, done = parseCommandLine(fs, args, stdout, stderr, serveUsage, 0)
	return s, code, done
}

// ruleOptions are envoyproxy/ratelimit's variables of how rules act, read
// from the environment only, as there.
type ruleOptions struct {
	quota, dynamicMetadata, stopIncrement bool
	nearRatio                             float64
	load                                  config.Options
}

// readRuleOptions reads ruleOptions, recording bad values in envErr.
func readRuleOptions(envErr *envflag.Errs) ruleOptions {
	envErr.Bools("QUOTA_MODE", "RESPONSE_DYNAMIC_METADATA", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "MERGE_DOMAIN_CONFIG")
	return ruleOptions{
		quota:           envflag.Bool("QUOTA_MODE", false),
		dynamicMetadata: envflag.Bool("RESPONSE_DYNAMIC_METADATA", false),
		stopIncrement:   envflag.Bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false),
		nearRatio:       nearRatio(envErr.Float("NEAR_LIMIT_RATIO", service.DefaultNearLimitRatio, 0, 1, "a number from 0 to 1, such as 0.8")),
		load:            config.Options{MergeDomains: envflag.Bool("MERGE_DOMAIN_CONFIG", false)},
	}
}

// nearRatio is NEAR_LIMIT_RATIO as service.Config takes it: there 0 is the
// default, so a ratio of 0 is the smallest one, which puts the threshold
// at 0 as 0 would.
func nearRatio(f float64) float64 {
	if f == 0 {
		return math.SmallestNonzeroFloat64
	}
	return f
}

// checkOptions refuses the settings serve cannot run with (exit 2): the
// environment variables that do not parse or that serve refuses, and
// flags out of their range; then it makes the logger and logs the
// settings accepted and not acted on.
func (s *serveApp) checkOptions() error {
	o := &s.o
	if len(s.envErr) > 0 {
		return daemon.ExitCode(2, errors.Join(s.envErr...))
	}
	if err := o.listen.Check(); err != nil {
		return daemon.ExitCode(2, err)
	}
	if err := o.checkLimits(); err != nil {
		return daemon.ExitCode(2, err)
	}
	if err := o.rlqs.check(); err != nil {
		return daemon.ExitCode(2, err)
	}
	if _, err := stores.Of(o.store); err != nil {
		return daemon.ExitCode(2, err)
	}
	if err := o.redis.Check(o.store); err != nil {
		return daemon.ExitCode(2, err)
	}
	if err := o.remote.check(s.fs, o); err != nil {
		return daemon.ExitCode(2, err)
	}
	if _, err := failsafe.ParseMode(o.failure); err != nil {
		return daemon.ExitCode(2, "-failure-mode:", err) // whatever the store: a typo must not wait for Redis
	}
	trusted, err := clientip.ParsePrefixes(envflag.List(o.trustedProxies)...)
	if err != nil {
		return daemon.ExitCode(2, "-trusted-proxies:", err)
	}
	s.trusted = trusted
	if s.log, err = daemon.NewLoggerFormat(o.logLevel, o.logFormat, s.fs.Output()); err != nil {
		return daemon.ExitCode(2, err)
	}
	if err := s.checkXDS(); err != nil {
		return err
	}
	ignored, moot := xdsNotActedOn(s.xds, slices.Concat(ratelimitenv.NotActedOn(), o.storeNotActedOn(), s.telSet.NotActedOn())), append(mootFlags(s.fs, o), o.listen.NotActedOn(s.fs)...)
	if len(ignored) > 0 || len(moot) > 0 {
		s.log.Info("accepted and not acted on", "env", strings.Join(ignored, ","), "flags", strings.Join(moot, ","))
	}
	return nil
}

// checkLimits refuses bounds out of their range.
func (o *serveOptions) checkLimits() error {
	switch {
	case o.maxOverride < 0 || o.maxOverride > math.MaxUint32:
		return fmt.Errorf("-max-override %d: want 0 (no maximum) to %d", o.maxOverride, uint32(math.MaxUint32))
	case o.memMaxBytes <= 0:
		return fmt.Errorf("-memory-max-bytes %d: want a positive number of bytes", o.memMaxBytes)
	case o.memClock != 0 && (o.memClock < memstore.MinClockResolution || o.memClock > maxMemClock):
		return fmt.Errorf("-memory-clock-resolution %v: want 0 (exact) or %v to %v", o.memClock, memstore.MinClockResolution, maxMemClock)
	case o.maxCost < 0:
		return fmt.Errorf("-max-cost %d: want 0 (no maximum) or more", o.maxCost)
	case o.jsonInFlight < service.MaxJSONBody:
		return fmt.Errorf("-json-max-bytes-in-flight %d: want at least %d (one body of the largest size)", o.jsonInFlight, service.MaxJSONBody)
	case o.jsonPerPeer != 0 && (o.jsonPerPeer < service.MaxJSONBody || o.jsonPerPeer > o.jsonInFlight):
		return fmt.Errorf("-json-max-bytes-per-peer %d: want 0 (the default share) or %d (one body of the largest size) to -json-max-bytes-in-flight %d", o.jsonPerPeer, service.MaxJSONBody, o.jsonInFlight)
	case o.maxDescs <= 0 || o.maxEntries <= 0:
		return fmt.Errorf("-max-descriptors %d, -max-entries %d: want at least 1", o.maxDescs, o.maxEntries)
	case o.maxDetailed <= 0:
		return fmt.Errorf("-detailed-metric-max-series %d: want at least 1", o.maxDetailed)
	}
	return nil
}

// loadConfig loads the config at start-up and checks it against the
// forward-auth settings and the store's limits, before the store is
// opened; then it reads -headers, whose refusal is exit 2.
//
// The files are checked (regular files, under the size cap, read within a
// deadline) before they are loaded, so that a FIFO or a device among them
// is refused instead of blocking start-up. SIGTERM during start-up is a
// stop, not a failure.
func (s *serveApp) loadConfig(ctx context.Context) error {
	if s.xds != nil {
		// Under xDS, no domains until the first config (see startXDS).
		s.rules, s.validate = noDomains(), s.o.validator()
		return s.readHeaders()
	}
	s.validate = s.o.validator()
	rules, err := s.loadStartConfig(ctx)
	if err != nil {
		if err = daemon.StoppedEarly(ctx, err); errors.Is(err, daemon.ErrStoppedEarly) || !s.o.forceStart {
			return err
		}
		// -start-without-config (FORCE_START_WITHOUT_INITIAL_CONFIG).
		s.log.Warn("starting without a config: no rule applies until a reload loads it", "config", s.o.configPath, "err", err)
	}
	s.rules = rules
	s.hasConfig.Store(hasDomain(rules))
	return s.readHeaders()
}

// loadStartConfig checks the config files and loads them, and checks the
// config against the forward-auth settings and the store's limits.
func (s *serveApp) loadStartConfig(ctx context.Context) (*config.Config, error) {
	sum, err := daemon.CheckConfigFiles(ctx, s.o.configPath)
	if err != nil {
		return nil, err
	}
	s.sum, s.known = sum, true
	rules, err := loadRules(ctx, s.o.configPath, s.o.rules.load)
	if err == nil {
		err = checkForwardAuth(rules, s.trusted) // before the store is opened
	}
	if err == nil {
		err = checkRulesForStore(rules, s.validate)
	}
	if err != nil {
		return nil, err
	}
	return rules, nil
}

// hasDomain reports whether c has a domain: what envoyproxy/ratelimit's
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED calls a config loaded.
func hasDomain(c *config.Config) bool { return len(c.Domains()) > 0 }

// readHeaders reads -headers, whose refusal is exit 2.
func (s *serveApp) readHeaders() (err error) {
	if s.headers, err = service.ParseHeaderMode(s.o.headers); err != nil {
		return daemon.ExitCode(2, err)
	}
	if s.policyNames, err = service.ParsePolicyNames(s.o.policyNames); err != nil {
		return daemon.ExitCode(2, fmt.Errorf("-header-policy-names (or SLUICE_HEADER_POLICY_NAMES): %w", err))
	}
	if strings.EqualFold(s.o.headers, "draft11") {
		s.log.Warn("-headers draft11 is the old spelling of draft-11; it still works", "headers", s.o.headers)
	}
	return nil
}

// openStore opens the store of -store and the metrics registry, with the
// memory store's metrics on it.
func (s *serveApp) openStore(ctx context.Context) error {
	o := &s.o
	st, err := openServeStore(ctx, o, envflag.IsSet(s.fs, "failure-mode"), s.log)
	if err != nil {
		return err
	}
	s.st = st
	s.reg = daemon.NewMetricsRegistry()
	if st.Mem != nil {
		s.reg.MustRegister(stores.NewMemCollector(st.Mem))
	}
	return nil
}

// serviceConfig returns the service's config from serve's settings and
// parts: the one place where a setting of the service is passed on.
func (s *serveApp) serviceConfig() service.Config {
	o := &s.o
	var rules service.Rules // nil, not a nil *config.Config, without a config
	if s.rules != nil {
		rules = s.rules
	}
	return service.Config{Limiter: s.st.Limiter, Rules: rules, Prefix: o.prefix, KeyFormat: o.redis.ServiceKeyFormat(), ShadowMode: o.shadow,
		Headers: s.headers, PolicyNames: s.policyNames, LegacyNames: service.LegacyNames(ratelimitenv.LegacyHeaderNames()), Logger: s.log, Registerer: s.reg, Failure: s.st.Failure, Healthy: s.healthy(),
		MaxDetailedSeries: o.maxDetailed, MaxOverride: uint32(o.maxOverride), MaxCost: uint64(o.maxCost),
		MaxDescriptors: o.maxDescs, MaxEntries: o.maxEntries, MaxJSONBytesInFlight: o.jsonInFlight,
		MaxJSONBytesPerPeer: o.jsonPerPeer, JSONBodyMinRate: cmp.Or(o.jsonMinRate, -1),
		QuotaMode: o.rules.quota, DynamicMetadata: o.rules.dynamicMetadata, NearLimitRatio: o.rules.nearRatio,
		StopIncrementWhenOverLimit: o.rules.stopIncrement, AllowRefunds: o.allowRefunds}
}

// healthy returns the service's Config.Healthy: nil (the process only),
// or the checks that -health-needs-store and -health-needs-config ask for.
func (s *serveApp) healthy() func() bool {
	store, cfg := s.o.healthNeedsStore, s.o.healthNeedsConfig
	if !store && !cfg {
		return nil
	}
	return func() bool {
		// envoyproxy/ratelimit's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION:
		// unhealthy while the store has never answered or is failing;
		// its HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: while no config
		// with a domain runs.
		// s.svc is nil while service.New asks.
		return (!store || s.st.Connected() && (s.svc == nil || s.svc.StoreAvailable())) && (!cfg || s.hasConfig.Load())
	}
}

// apply swaps a reloaded config in: the forward-auth mapping is built
// first, so that a config whose mapping fails keeps the running one.
func (s *serveApp) apply(c *config.Config) error {
	if err := checkRulesForStore(c, s.validate); err != nil {
		return err
	}
	h, err := s.auth.build(c)
	if err != nil {
		return err
	}
	if err := s.svc.SetRules(c); err != nil {
		return err
	}
	s.auth.h.Store(&h)
	s.rlqs.setRules(c)
	s.running.Store(c)
	s.hasConfig.Store(hasDomain(c))
	s.svc.RecheckHealth() // gRPC health's Watch streams follow hasConfig
	s.configLoaded(c)
	logConfigWarnings(s.log, c.Warnings())
	return nil
}

// maxWarningLines bounds the warning lines of one config load: a file (or
// an xDS resource) of many descriptors can hold as many warnings, and each
// reload or update would log them all again.
const maxWarningLines = 10

// logConfigWarnings logs the first maxWarningLines of ws, one line each,
// and then one line with how many more there are.
func logConfigWarnings(log *slog.Logger, ws []*config.Error) {
	for i, w := range ws {
		if i == maxWarningLines {
			log.Warn("config: more warnings not logged; sluice check lists them all", "more", len(ws)-i)
			return
		}
		log.Warn("config: loaded, but this changes nothing or is read as envoyproxy/ratelimit reads it", "warning", w.Error())
	}
}

// configSource returns the reloader of the config files, nil for the
// built-in example (nothing to reload). Another source of config (xDS)
// would give its configs to apply instead, and return nil.
func (s *serveApp) configSource() (*daemon.Reloader, error) {
	if s.o.configPath == "" {
		return nil, nil
	}
	load := func(path string) error {
		ctx, cancel := context.WithTimeout(context.Background(), config.LoadTimeout)
		defer cancel()
		rules, err := loadConfigPath(ctx, s.o.rules.load, path)
		if err == nil {
			err = s.apply(rules)
		}
		s.svc.ConfigLoaded(err)
		return err
	}
	return daemon.NewReloader(s.o.configPath, load, s.log, s.reg, s.sum, s.known)
}

// grpcServerOptions returns the gRPC server's options: the service's and
// the listener's bounds, tracing's, and the TLS credentials of -grpc-tls.
func (s *serveApp) grpcServerOptions() []grpc.ServerOption {
	opts := slices.Concat(service.GRPCServerOptions(), s.o.listen.GRPCOptions(), s.tel.GRPCOptions())
	if s.grpcTLS != nil {
		opts = append(opts, s.grpcTLS.ServerOption())
	}
	return opts
}

// listen opens serve's listeners: HTTP; gRPC on TCP or -grpc-uds, with
// the TLS files of -grpc-tls loaded (a bad one is exit status 1); the
// debug listener of -debug-addr.
func (s *serveApp) listen(ctx context.Context, a *daemon.App) (err error) {
	lo := &s.o.listen
	if lo.TLS.Use {
		if s.grpcTLS, err = daemon.NewGRPCTLS(ctx, lo.TLS, s.log, time.Now); err != nil {
			return err
		}
	}
	if s.httpLn, err = a.Listen(s.o.httpAddr); err != nil {
		return err
	}
	if s.grpcLn, err = daemon.ListenGRPC(s.o.grpcAddr, lo.UDS); err != nil {
		return err
	}
	a.OnClose(func() { s.grpcLn.Close() })
	if s.debug, err = daemon.ListenDebug(lo.DebugAddr, lo, daemon.DebugHandler(s.runningRules), s.log); err != nil {
		return err
	}
	if s.debug != nil {
		a.OnClose(func() { s.debug.Close() })
	}
	return nil
}

// runningRules returns the running config: the last one apply swapped
// in, else the one of start-up (nil without one).
func (s *serveApp) runningRules() *config.Config {
	if c := s.running.Load(); c != nil {
		return c
	}
	return s.rules
}

// startServers serves HTTP (POST /json, forward auth, health, metrics) and
// gRPC on their listeners. Each listener holds at most its share of the
// file descriptors; at the HTTP cap, an idle keep-alive connection gives
// its place to a new client (see daemon.CapConns). The drain ends the gRPC health
// Watch streams once they have sent NOT_SERVING (see daemon.WatchDrain).
func (s *serveApp) startServers(a *daemon.App) {
	mux := http.NewServeMux()
	mux.Handle(service.ForwardAuthPath, s.auth)
	mux.Handle("/", s.svc.Handler())
	hs := s.o.listen.HTTPServer(s.tel.Handler(mux), s.log)
	watches := &daemon.WatchDrain{}
	a.OnDrain(watches.Drain)
	gs := grpc.NewServer(append(s.grpcServerOptions(), grpc.ChainStreamInterceptor(watches.Intercept))...)
	s.svc.RegisterGRPC(gs)
	s.rlqs.srv.Register(gs)
	httpCapped, httpConnState := daemon.CapConns(s.httpLn, s.o.listen.HTTPMaxConns)
	hs.ConnState = httpConnState
	grpcCapped, _ := daemon.CapConns(s.grpcLn, s.o.listen.GRPCMaxConns)
	a.ServeHTTP(hs, httpCapped)
	a.ServeGRPC(gs, grpcCapped)
	if s.debug != nil {
		a.Serve(s.debug.Serve, s.debug.Shutdown)
	}
}

// printBanner prints what serve serves and where, at the addresses its
// listeners are bound to (a wildcard one said to be every interface),
// and with the built-in example, how to try it. With -log-format json it
// is one JSON line with the log's keys instead (and no "try it").
func (s *serveApp) printBanner(stdout io.Writer) {
	source := s.configName()
	endpoints := "POST /json, GET /healthcheck, GET /metrics"
	if fa := s.rules.ForwardAuth(); fa != nil {
		endpoints = "POST /json, " + service.ForwardAuthPath + " (forward auth, domain " + fa.Domain + "), GET /healthcheck, GET /metrics"
	}
	httpURL := "http://" + s.httpLn.Addr().String()
	grpcAt := daemon.GRPCTarget(s.grpcLn.Addr())
	grpcServes := "envoy.service.ratelimit.v3.RateLimitService and RLQS" + s.o.listen.TLS.Describe()
	if strings.EqualFold(s.o.logFormat, "json") {
		h, err := daemon.LogHandler("json", stdout, nil)
		if err == nil {
			slog.New(h).Info("serving", "version", buildVersion(), "config", source, "store", stores.Name(s.o.store),
				"http", httpURL, "http_endpoints", endpoints, "http_every_interface", daemon.EveryInterface(s.httpLn.Addr()),
				"grpc", grpcAt, "grpc_services", grpcServes, "grpc_every_interface", daemon.EveryInterface(s.grpcLn.Addr()),
				"debug", daemon.DescribeDebug(s.debug))
		}
		return
	}
	fmt.Fprintf(stdout, "sluice %s serving %s on store %s\n", buildVersion(), source, stores.Name(s.o.store))
	fmt.Fprintf(stdout, "  HTTP  %s  (%s%s)\n", httpURL, daemon.WhereBound(s.httpLn.Addr()), endpoints)
	fmt.Fprintf(stdout, "  gRPC  %s  (%s%s)\n", grpcAt, daemon.WhereBound(s.grpcLn.Addr()), grpcServes)
	fmt.Fprintf(stdout, "  debug %s\n", daemon.DescribeDebug(s.debug))
	if s.o.configPath == "" && s.xds == nil {
		httpAddr := daemon.LocalAddr(s.httpLn.Addr()) // what a curl on this machine reaches
		fmt.Fprintf(stdout, "Try it: the example allows 3 per minute per user, so the 4th is a 429:\n")
		fmt.Fprintf(stdout, "  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code}\\n' -XPOST http://%s/json -d '{\"domain\":\"example\",\"descriptors\":[{\"entries\":[{\"key\":\"user\",\"value\":\"alice\"}]}]}'; done\n", httpAddr)
		fmt.Fprintf(stdout, "The same as a reverse proxy's forward-auth call (X-User is the user; try -i for the headers):\n")
		fmt.Fprintf(stdout, "  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code}\\n' -H 'X-User: bob' http://%s%s; done\n", httpAddr, service.ForwardAuthPath)
	}
}

// configName names serve's config source: its path, the xDS server, or
// the built-in example.
func (s *serveApp) configName() string {
	if s.xds != nil {
		return "the config from the xDS server " + s.xds.client.Target
	}
	return cmp.Or(s.o.configPath, "the built-in example config")
}

// loadRules loads the config at path, or the built-in example when path is
// empty, with opts; it gives up when ctx ends (SIGTERM) or after
// config.LoadTimeout.
func loadRules(ctx context.Context, path string, opts config.Options) (*config.Config, error) {
	if path != "" {
		ctx, cancel := context.WithTimeout(ctx, config.LoadTimeout)
		defer cancel()
		return loadConfigPath(ctx, opts, path)
	}
	d, err := config.Parse("built-in example", exampleConfig)
	if err != nil {
		return nil, err
	}
	return config.New(d)
}

// loadConfigPath loads the config at path with opts, as
// envoyproxy/ratelimit loads its config directory: a directory that
// exists and holds no config file (no *.yaml or *.yml that is not a dot
// file) is a config of no domains, under which every descriptor is
// unmatched and allowed, not an error. A path that does not exist is
// still one.
func loadConfigPath(ctx context.Context, opts config.Options, path string) (*config.Config, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		if files, err := config.Files(path); err == nil && len(files) == 0 {
			return noDomains(), nil
		}
	}
	return opts.LoadContext(ctx, path)
}

// maxMemClock is the coarsest -memory-clock-resolution: coarser, refills
// and window ends would be late by a sizeable part of a short period.
const maxMemClock = 10 * time.Millisecond

// openStore is stores.Open logging on slog's default logger, with the
// memory store's defaults.
func openStore(ctx context.Context, store, failure string) (sluice.Limiter, *service.FailurePolicy, func(), error) {
	o, err := stores.Open(ctx, store, nil, failure, memstore.Config{}, slog.Default())
	return o.Limiter, o.Failure, o.Close, err
}

// authEndpoint is serve's /auth: the forward-auth handler of the running
// config's forward_auth section, swapped on reload; 404 while the config
// has none. It is safe for concurrent use.
type authEndpoint struct {
	svc     *service.Service
	trusted []netip.Prefix // -trusted-proxies

	h atomic.Pointer[http.Handler] // nil or a nil handler: no mapping
}

// ServeHTTP answers with the running mapping's handler, or 404.
func (a *authEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := a.h.Load(); h != nil && *h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.NotFound(w, r)
}

// set builds the handler of c's mapping and serves it.
func (a *authEndpoint) set(c *config.Config) error {
	h, err := a.build(c)
	if err != nil {
		return err
	}
	a.h.Store(&h)
	return nil
}

// checkForwardAuth reports a client_ip entry of c's forward_auth section
// when no proxy is trusted at all, neither by the section nor by the
// -trusted-proxies list flag: every auth request comes from the proxy, so
// without trusting it every client would share the proxy's address. The
// error names the entry's file, line and column.
func checkForwardAuth(c *config.Config, flag []netip.Prefix) error {
	fa := c.ForwardAuth()
	if fa == nil || len(fa.TrustedProxies) > 0 || len(flag) > 0 {
		return nil
	}
	if e := fa.NeedsClientIP(); e != nil {
		return &config.Error{File: fa.File, Line: e.Line, Column: e.Column, Msg: fmt.Sprintf(
			"forward_auth entry %q is from: client_ip, but no proxy is trusted: list the proxies that call /auth in forward_auth's trusted_proxies or in sluice serve -trusted-proxies",
			e.Key)}
	}
	return nil
}

// build returns the forward-auth handler of c's forward_auth section, nil
// when it has none; the trusted proxies are the section's and
// -trusted-proxies together. Its errors are *config.Error values (see
// checkForwardAuth).
func (a *authEndpoint) build(c *config.Config) (http.Handler, error) {
	fa := c.ForwardAuth()
	if fa == nil {
		return nil, nil
	}
	if err := checkForwardAuth(c, a.trusted); err != nil {
		return nil, err
	}
	trusted := append(slices.Clip(fa.TrustedProxies), a.trusted...)
	h, err := a.svc.ForwardAuthHandler(fa, &clientip.Resolver{TrustedProxies: trusted})
	if err != nil {
		return nil, &config.Error{File: fa.File, Line: fa.Line, Msg: "forward_auth: " + err.Error(), Err: err}
	}
	return h, nil
}
