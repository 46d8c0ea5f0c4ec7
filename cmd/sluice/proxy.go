package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/safefile"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/plans"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/request"
	"github.com/sluicehq/sluice/service"
)

// proxyOptions are the flags of sluice proxy.
type proxyOptions struct {
	configPath, upstream, listen, adminAddr, store, failure string
	accessLog, logLevel, logKeySecretFile, maxBody          string
	logFormat                                               string // -log-format: text or json, the access log's too
	bodyMinRate                                             string
	maxBodySize                                             int64 // -client-max-body-size read: 0 unset, -1 off
	dryRun, h2c, watch, check                               bool
	timeouts                                                gateway.Timeouts // 0: the file's, else NGINX's
	maxConns, maxQueued                                     int
	storeTimeout                                            time.Duration    // -store-timeout: failsafe.Config.Timeout; 0 its default
	failureNodes                                            int              // -failure-nodes: failsafe.Config.Nodes; 0 is 1
	admin                                                   daemon.AdminAuth // the page's and admin API's (see proxyadmin.go)
	fs                                                      *flag.FlagSet    // for the flags given

	// plans are -plans and -plans-staleness (proxyplans.go).
	plans plansFlags
	// memory are -memory-max-bytes and -memory-max-keys (proxymem.go).
	memory memoryFlags
}

// runProxy runs the rate limiting reverse proxy until ctx ends, then drains
// it: requests in flight (queued ones included) finish for up to 10
// seconds. It runs the steps of the app lifecycle (see daemon.App) with the
// proxy's parts.
func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := daemon.NewApp(stderr, "sluice proxy:") // first: SIGHUP during start-up must not kill the proxy
	defer a.Close()
	o, code, done := parseProxyFlags(args, stdout, stderr)
	if done {
		return code
	}
	p := &proxyApp{o: o, stderr: stderr}
	if err := p.checkOptions(); err != nil {
		return a.Exit(err)
	}
	a.Log = p.log
	sum, known := daemon.FingerprintBeforeLoad(p.o.configPath)
	file, err := loadProxyFile(ctx, p.o) // with the size flags checkOptions read
	if err != nil {
		return a.Exit(err)
	}
	p.file = file
	if p.o.check {
		if err := p.preflight(ctx); err != nil {
			return a.Exit(err)
		}
		return checkProxy(file, stdout, stderr)
	}
	if err := p.start(ctx, a, sum, known); err != nil {
		return a.Exit(err)
	}
	p.printBanner(stdout)
	return a.Run(ctx)
}

// proxyApp is the proxy's parts, as its start-up steps open them.
type proxyApp struct {
	o      proxyOptions
	stderr io.Writer
	log    *slog.Logger
	file   *gateway.File // the config at start-up

	logKeySecret []byte
	accessLog    io.Writer
	limiter      sluice.Limiter
	conns        *redisConns     // the conns' counts on Redis; nil on the memory store
	mem          *memstore.Store // the memory store, or failure mode local's; nil without
	reg          *prometheus.Registry
	limits       *httplimit.Metrics
	metrics      *gateway.Metrics
	gw           *gateway.Gateway
	pg           proxyPage // the live page; off without admin auth

	ln, adminLn net.Listener // adminLn nil without -admin-addr
	adminScheme string       // http, or https with -admin-tls-cert

	// plans is where the gateway looks tenants up (-plans); nil without.
	plans *plans.Cache
}

// start opens the proxy's parts and starts its listeners, step by step: the
// start-only settings of the file (openFileSettings), the store
// (openLimiter), the metrics, the gateway, the config's reloader, and
// the listeners.
func (p *proxyApp) start(ctx context.Context, a *daemon.App, sum [sha256.Size]byte, known bool) error {
	if err := p.openFileSettings(ctx, a); err != nil {
		return err
	}
	if err := p.openLimiter(ctx, a); err != nil {
		return err
	}
	if err := p.openMetrics(); err != nil {
		return err
	}
	if err := p.openPlans(ctx, a); err != nil {
		return err
	}
	if err := p.openPage(ctx); err != nil {
		return err
	}
	gw, err := gateway.New(p.complete(p.file))
	if err != nil {
		return err
	}
	p.gw = gw
	a.OnClose(gw.Close)
	for _, u := range p.file.Config.Upstreams {
		checkUpstream(ctx, p.log, u)
	}
	var rl *daemon.Reloader
	if p.o.configPath != "" {
		if rl, err = daemon.NewReloader(p.o.configPath, func(string) error { return p.reload(ctx) }, p.log, p.reg, sum, known); err != nil {
			return err
		}
	}
	a.ReloadWith(rl, "no -config")
	if err := p.serve(ctx, a); err != nil {
		return err
	}
	daemon.ReopenAccessLogOn(a, p.accessLog, p.log, syscall.SIGUSR1)
	if p.o.watch {
		a.Watch(ctx, p.o.configPath, nil, "config file")
	}
	return nil
}

// parseProxyFlags reads the proxy's command line; done is true when the
// proxy is to end with code (-h, or a flag that does not parse).
func parseProxyFlags(args []string, stdout, stderr io.Writer) (o proxyOptions, code int, done bool) {
	fs := flag.NewFlagSet("sluice proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "", "the proxy's YAML config (routes, limits, conns; see docs/proxy.md)")
	fs.StringVar(&o.upstream, "upstream", "", "the upstream URL (overrides the config's first upstream)")
	fs.StringVar(&o.listen, "listen", "", `address to listen on (default the config's "listen", else :8080)`)
	fs.StringVar(&o.adminAddr, "admin-addr", "127.0.0.1:9901", "address of /metrics and /healthcheck (no authentication), and with a token (-admin-token-file or "+daemon.AdminTokenEnv+") or -admin-client-ca of the live page (/page) and admin API behind it; empty: none")
	o.admin.Flags(fs)
	o.fs = fs
	o.memory.flags(fs)
	o.plans.flags(fs, "PostgreSQL URL of plans and per-tenant overrides, whose schema sluice serve or sluice migrate made; the config's plans block names the tenant's header; empty: off")
	fs.StringVar(&o.store, "store", "", `memory, or a Redis URL (default the config's "store", else memory)`)
	fs.StringVar(&o.failure, "failure-mode", stores.DefaultFailureMode, "with Redis, what to do when it fails: local (the process decides its share of each limit in memory, see -failure-nodes), closed or open (admit)")
	stores.FailureNodesFlag(fs, &o.failureNodes)
	stores.TimeoutFlag(fs, &o.storeTimeout, "Redis", "250ms")
	fs.StringVar(&o.accessLog, "access-log", "", `where the access log of refused requests goes: stderr, stdout, off or a file (default the config's, else stderr)`)
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", envflag.String("LOG_FORMAT", "text"), "log format: text, or json (envoyproxy/ratelimit's keys: @timestamp, @message, level); json writes the access log as JSON too")
	fs.StringVar(&o.logKeySecretFile, "log-key-secret-file", "", "a file holding the secret (16 bytes at least) of the keyed hash that logs show of keys, the same on every replica so that their logs correlate (default the config's log_key_secret_file, else a random secret per process)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "decide and log, never refuse or delay (NGINX's limit_req_dry_run)")
	fs.BoolVar(&o.h2c, "h2c", false, "also accept HTTP/2 without TLS (prior knowledge)")
	fs.BoolVar(&o.watch, "watch", true, "reload the config when its file changes (SIGHUP always reloads)")
	fs.BoolVar(&o.check, "check", false, "check the config, print its routes and exit (like nginx -t)")
	fs.DurationVar(&o.timeouts.ClientHeader, "client-header-timeout", 0, "time to read a request's header (default the config's client_header_timeout, else 60s)")
	fs.DurationVar(&o.timeouts.ClientBody, "client-body-timeout", 0, "time between two reads of a request's body; past it 408 (default the config's client_body_timeout, else 60s)")
	fs.StringVar(&o.bodyMinRate, "client-body-min-rate", "", "the least average rate of a streamed request body, bytes per second (such as 1k): slower, past client-body-timeout, is 408; 0: off (default the config's client_body_min_rate, else 1k)")
	fs.DurationVar(&o.timeouts.Send, "send-timeout", 0, "time for each write of a response to the client; past it the connection closes (default the config's send_timeout, else 60s)")
	fs.IntVar(&o.maxConns, "max-conns", 0, "open client connections at most on -listen (NGINX's worker_connections): at the cap a new one takes the place of the connection idle longest, or waits; 0: 40% of the open-file limit, negative: no cap")
	fs.StringVar(&o.maxBody, "client-max-body-size", "", "the largest request body, as NGINX's client_max_body_size (such as 512k, 1m, 10m): larger is 413, charged nothing when its Content-Length says so; 0: no cap (default the config's client_max_body_size, else 1m)")
	fs.IntVar(&o.maxQueued, "max-queued", 0, "requests waiting in the limits' queues at most, all keys and routes together; beyond: 503 (0: 4096, negative: no bound)")
	fs.DurationVar(&o.timeouts.Keepalive, "keepalive-timeout", 0, "how long an idle keep-alive connection is kept (default the config's keepalive_timeout, else 75s)")
	code, done = parseCommandLine(fs, args, stdout, stderr, proxyUsage, 0)
	return o, code, done
}

// checkOptions refuses the flags the proxy cannot run with (exit 2), makes
// the logger, sets the garbage collector's pace and reads the size flags.
func (p *proxyApp) checkOptions() error {
	o := &p.o
	for _, d := range []time.Duration{o.timeouts.ClientHeader, o.timeouts.ClientBody, o.timeouts.Send, o.timeouts.Keepalive} {
		if d < 0 {
			return daemon.ExitCode(2, "a timeout flag is negative: want a positive duration such as 30s")
		}
	}
	if o.configPath == "" && o.upstream == "" {
		return daemon.ExitCode(2, "give -config FILE, -upstream URL, or both")
	}
	if err := stores.CheckTimeout(o.storeTimeout); err != nil {
		return daemon.ExitCode(2, err)
	}
	if err := stores.CheckFailureNodes(o.failureNodes); err != nil {
		return daemon.ExitCode(2, err)
	}
	if err := o.memory.check(); err != nil {
		return daemon.ExitCode(2, err)
	}
	if _, err := failsafe.ParseMode(o.failure); err != nil {
		return daemon.ExitCode(2, "-failure-mode:", err) // whatever the store, as serve
	}
	var err error
	if p.log, err = daemon.NewLoggerFormat(o.logLevel, o.logFormat, p.stderr); err != nil {
		return daemon.ExitCode(2, err)
	}
	if os.Getenv("GOGC") == "" {
		// A proxy's live heap is a few MB of buffers and connections, so
		// the default GOGC=100 collects very often, and each collection
		// shows in the latency tail. 400 trades a few MB for a quarter of
		// the collections; GOGC in the environment overrides it.
		debug.SetGCPercent(400)
	}
	if o.maxBody != "" { // else the file's, else the gateway's default
		if o.maxBodySize, err = gateway.ParseSizeOrOff(o.maxBody); err != nil {
			return daemon.ExitCode(2, "-client-max-body-size:", err)
		}
	}
	if o.bodyMinRate != "" {
		if o.timeouts.ClientBodyMinRate, err = gateway.ParseSizeOrOff(o.bodyMinRate); err != nil {
			return daemon.ExitCode(2, "-client-body-min-rate:", err)
		}
	}
	return nil
}

// openFileSettings reads the settings that apply at start only (see
// startOnly): the log key secret (the flag's file before the config's),
// the listen address, the store and the access log.
func (p *proxyApp) openFileSettings(ctx context.Context, a *daemon.App) error {
	var err error
	if p.logKeySecret, err = p.readSecret(ctx); err != nil {
		return err
	}
	p.o.listen = cmp.Or(p.o.listen, p.file.Listen, ":8080")
	p.o.store = cmp.Or(p.o.store, p.file.Store)
	if err := checkProxyStore(p.o.store); err != nil {
		return daemon.ExitCode(2, err)
	}
	accessLog, closeLog, err := daemon.OpenAccessLog(cmp.Or(p.o.accessLog, p.file.AccessLog), p.stderr)
	if err != nil {
		return err
	}
	p.accessLog = accessLog
	a.OnClose(closeLog)
	return nil
}

// openLimiter opens the store: Redis behind one breaker, with the
// -failure-mode (local mode decides on an in-process store meanwhile) and
// the decision deadline of -store-timeout, or the memory store (which
// never fails and has no deadline: a -failure-mode or -store-timeout given
// with it is logged as not acted on).
func (p *proxyApp) openLimiter(ctx context.Context, a *daemon.App) error {
	memCfg := p.o.memory.config(p.file)
	st, err := stores.Open(ctx, p.o.store, nil, p.o.failure, memCfg, p.log)
	if err != nil {
		return err
	}
	a.OnClose(st.Close)
	limiter, failure := st.Limiter, st.Failure
	p.limiter, p.mem = limiter, st.Mem
	if failure == nil {
		p.logMemoryMoot()
		return nil
	}
	if ls, ok := limiter.(*redisstore.Lazy); ok { // conns are counted on Redis too
		p.conns = &redisConns{store: ls, mode: failure.Mode}
	}
	fc := p.failsafeConfig(limiter, failure)
	if failure.Mode != failsafe.Local && p.o.memory.anyGiven(p.file) {
		p.log.Info("accepted and not acted on", "settings", "memory_max_bytes,memory_max_keys", "why", "with Redis the memory store is -failure-mode local's only")
	}
	if failure.Mode == failsafe.Local {
		// stores.Open's local store, held to memCfg's budget and closed
		// with the store.
		local := failure.Local.(*memstore.Store)
		fc.Local, p.mem = local, local
	}
	fl, err := failsafe.New(fc)
	if err != nil {
		return err
	}
	p.limiter = fl
	return nil
}

// checkProxyStore refuses a -store (or the file's store) that names no
// kind of store, or a kind the proxy cannot decide on, by name.
func checkProxyStore(store string) error {
	kind, err := stores.Of(store)
	if err != nil {
		return err
	}
	if !kind.Proxy {
		var can []string
		for _, k := range stores.Kinds {
			if k.Proxy {
				can = append(can, k.Name)
			}
		}
		return fmt.Errorf("-store %s: sluice proxy decides on %s, not on %s (sluice serve does)", stores.Name(store), strings.Join(can, " or "), kind.Name)
	}
	return nil
}

// logMemoryMoot names, in one line, the store flags given that the memory
// store makes moot (stores.Memory.ProxyMoot): -failure-mode and
// -failure-nodes (it never fails) and -store-timeout (it has no deadline).
func (p *proxyApp) logMemoryMoot() {
	given := map[string]bool{"failure-mode": envflag.IsSet(p.o.fs, "failure-mode"),
		"store-timeout": p.o.storeTimeout > 0, "failure-nodes": p.o.failureNodes > 0}
	var moot []string
	for _, f := range stores.Memory.ProxyMoot {
		if given[f] {
			moot = append(moot, "-"+f)
		}
	}
	if len(moot) > 0 {
		p.log.Info("accepted and not acted on", "flags", strings.Join(moot, ","), "why", "the memory store never fails and has no deadline")
	}
}

// failsafeConfig is the failsafe.Config of the breaker around the store
// limiter: failure's mode, and the decision deadline of -store-timeout (0:
// failure's, failsafe's default). Local mode's store is the caller's to
// add.
func (p *proxyApp) failsafeConfig(limiter sluice.Limiter, failure *service.FailurePolicy) failsafe.Config {
	stores.WithTimeout(failure, p.o.storeTimeout)
	stores.WithFailureNodes(failure, p.o.failureNodes, 0)
	return failsafe.Config{Primary: limiter, Mode: failure.Mode, Timeout: failure.Timeout, Nodes: failure.Nodes,
		Partitions: failure.Partitions, Logger: p.log}
}

// openMetrics makes the registry of /metrics, with the process's, the
// limits' and the gateway's metrics.
func (p *proxyApp) openMetrics() error {
	p.reg = daemon.NewMetricsRegistry()
	if p.mem != nil {
		p.reg.MustRegister(stores.NewMemCollector(p.mem))
	}
	var err error
	if p.limits, err = httplimit.NewMetrics(p.reg); err != nil {
		return err
	}
	p.metrics, err = gateway.NewMetrics(p.reg)
	return err
}

// complete fills in what the file does not say.
func (p *proxyApp) complete(f *gateway.File) gateway.Config {
	c := f.Config
	c.Limiter, c.Logger, c.AccessLog, c.Limits, c.Metrics = p.limiter, p.log, p.accessLog, p.limits, p.metrics
	c.LogKeySecret = p.logKeySecret
	c.AccessLogJSON = strings.EqualFold(p.o.logFormat, "json")
	c.Plans = p.withPlans(c.Plans)
	if p.conns != nil {
		c.InFlight = p.conns
	}
	c.DryRun = c.DryRun || p.o.dryRun
	c.MaxQueued = p.o.maxQueued
	c.Observer = p.observer()
	return c
}

// reload loads the config file again and swaps it in; the settings that
// apply at start only are named in a warning when they changed.
func (p *proxyApp) reload(ctx context.Context) error {
	f, err := loadProxyFile(ctx, p.o)
	if err != nil {
		return err
	}
	if err := p.gw.Update(p.complete(f)); err != nil {
		return err
	}
	p.configLoaded()
	if s := startOnly(p.file, f); len(s) > 0 {
		p.log.Warn("reloaded, but these settings apply only at start; restart to change them", "settings", s)
	}
	return nil
}

// serve opens the listeners and serves the gateway on -listen and, with
// -admin-addr, /metrics and /healthcheck on the admin listener.
func (p *proxyApp) serve(ctx context.Context, a *daemon.App) error {
	ln, err := a.Listen(p.o.listen)
	if err != nil {
		return err
	}
	p.ln = ln
	// A cap on client connections keeps file descriptors for the
	// upstreams, the store and the config file, whatever the clients do;
	// at the cap, an idle keep-alive connection gives its place to a new
	// one.
	ln, connState := daemon.CapConns(ln, p.o.maxConns)
	// The header and idle timeouts are the server's; the gateway bounds
	// each read of a body and each write of a response itself, so that
	// neither a long upload nor a long stream is cut.
	hs := p.file.Config.Timeouts.Server(p.gw, p.log)
	hs.ConnState = connState
	if p.o.h2c {
		var pr http.Protocols
		pr.SetHTTP1(true)
		pr.SetUnencryptedHTTP2(true)
		hs.Protocols = &pr
	}
	a.ServeHTTP(hs, ln)
	if p.o.adminAddr == "" {
		return nil
	}
	if p.adminLn, err = a.Listen(p.o.adminAddr); err != nil {
		return daemon.ExitCode(1, "admin:", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "OK\n") })
	// Nothing on the admin listener streams: its whole request and
	// response are bounded too.
	admin := p.file.Config.Timeouts.Server(p.adminHandler(mux), p.log)
	at := p.file.Config.Timeouts.WithDefaults()
	admin.ReadTimeout, admin.WriteTimeout = at.ClientHeader+at.ClientBody, at.Send
	p.adminScheme, err = p.o.admin.ServeAdminOn(ctx, a, p.adminLn, admin, p.pg.page)
	return err
}

// printBanner prints where the proxy listens and what it forwards to.
// With -log-format json (LOG_FORMAT=json) it is one JSON line with the
// log's keys instead, as serve's.
func (p *proxyApp) printBanner(stdout io.Writer) {
	if strings.EqualFold(p.o.logFormat, "json") {
		p.printJSONBanner(stdout)
		return
	}
	fmt.Fprintf(stdout, "sluice %s proxy on store %s\n", buildVersion(), stores.Name(p.o.store))
	fmt.Fprintf(stdout, "  listening  http://%s", daemon.LocalAddr(p.ln.Addr()))
	if p.o.h2c {
		fmt.Fprint(stdout, "  (HTTP/1.1 and h2c)")
	}
	fmt.Fprintln(stdout)
	for _, u := range p.file.Config.Upstreams {
		fmt.Fprintf(stdout, "  upstream   %s  %s\n", u.Name, redact.URL(u.URL.String()))
	}
	if p.adminLn != nil {
		fmt.Fprintf(stdout, "  admin      %s://%s  (GET /metrics, GET /healthcheck)\n", p.adminScheme, daemon.LocalAddr(p.adminLn.Addr()))
		if p.pg.page != nil {
			base := p.adminScheme + "://" + daemon.LocalAddr(p.adminLn.Addr())
			fmt.Fprintf(stdout, "  page       %s%s  (admin token or client certificate)\n", base, page.Path)
			if p.o.admin.NoLoginLink {
				fmt.Fprintf(stdout, "  login      sluice admin login prints a one-time link (-admin-login-link=false)\n")
			} else if link, _ := p.pg.api.LoginLink(base); link != "" {
				fmt.Fprintf(stdout, "  login      %s  (opens the page in a browser once, within %v; sluice admin login prints another)\n", link, admin.LoginLinkTTL)
			}
		}
	}
}

// printJSONBanner is printBanner's one JSON line: the listener's URL in
// listen, the upstreams as name=URL in upstreams, and the admin
// listener's URL (empty without one) in admin, with page the live page's
// URL when it is served, and login its one-time login link (empty with
// -admin-login-link=false), as the text banner prints it.
func (p *proxyApp) printJSONBanner(stdout io.Writer) {
	h, err := daemon.LogHandler("json", stdout, nil)
	if err != nil {
		return
	}
	ups := make([]string, 0, len(p.file.Config.Upstreams))
	for _, u := range p.file.Config.Upstreams {
		ups = append(ups, u.Name+"="+redact.URL(u.URL.String()))
	}
	var admin, pageURL, login string
	if p.adminLn != nil {
		admin = p.adminScheme + "://" + daemon.LocalAddr(p.adminLn.Addr())
		if p.pg.page != nil {
			pageURL = admin + page.Path
			if !p.o.admin.NoLoginLink {
				login, _ = p.pg.api.LoginLink(admin)
			}
		}
	}
	slog.New(h).Info("proxying", "version", buildVersion(), "store", stores.Name(p.o.store),
		"listen", "http://"+daemon.LocalAddr(p.ln.Addr()), "h2c", p.o.h2c, "upstreams", ups,
		"admin", admin, "page", pageURL, "login", login)
}

// startOnly names the settings of f, a reloaded config, that differ from
// those of started and that a reload does not apply.
func startOnly(started, f *gateway.File) []string {
	var s []string
	for _, c := range []struct {
		name     string
		was, now any
	}{
		{"listen", started.Listen, f.Listen},
		{"store", started.Store, f.Store},
		{"memory_max_bytes", started.MemoryMaxBytes, f.MemoryMaxBytes},
		{"memory_max_keys", started.MemoryMaxKeys, f.MemoryMaxKeys},
		{"access_log", started.AccessLog, f.AccessLog},
		{"log_key_secret_file", started.LogKeySecretFile, f.LogKeySecretFile},
		{"upstream_timeout", started.Config.UpstreamTimeout, f.Config.UpstreamTimeout},
		{"client_header_timeout", started.Config.Timeouts.ClientHeader, f.Config.Timeouts.ClientHeader},
		{"keepalive_timeout", started.Config.Timeouts.Keepalive, f.Config.Timeouts.Keepalive},
	} {
		if c.was != c.now {
			s = append(s, c.name)
		}
	}
	return s
}

// checkProxy validates f as the proxy would run it and prints its routes.
func checkProxy(f *gateway.File, stdout, stderr io.Writer) int {
	c := f.Config
	c.Limiter = memstore.New(memstore.Config{SweepInterval: -1})
	defer c.Limiter.(*memstore.Store).Close()
	c.Logger = slog.New(slog.DiscardHandler)
	if c.Plans != nil {
		c.Plans = &gateway.Plans{TenantHeader: c.Plans.TenantHeader, Limits: noPlans{}}
	}
	if len(c.Upstreams) == 0 {
		fmt.Fprintf(stderr, "sluice proxy: %s: no upstream (set upstream in the file, or -upstream)\n", f.Name)
		return 1
	}
	g, err := gateway.New(c)
	if err != nil {
		fmt.Fprintf(stderr, "sluice proxy: %s: %v\n", f.Name, err)
		return 1
	}
	g.Close()
	fmt.Fprintf(stdout, "%s: ok\n", f.Name)
	for _, u := range c.Upstreams {
		fmt.Fprintf(stdout, "upstream %s %s", u.Name, redact.URL(u.URL.String()))
		if u.MaxInFlight > 0 {
			fmt.Fprintf(stdout, " max_in_flight=%d", u.MaxInFlight)
		}
		if u.Adaptive != nil {
			fmt.Fprint(stdout, " max_in_flight=adaptive")
		}
		if u.PathSemantics != request.PathStrict {
			fmt.Fprintf(stdout, " path_semantics=%v", u.PathSemantics)
		}
		fmt.Fprintln(stdout)
	}
	for _, rt := range c.Routes {
		printRoute(stdout, rt, c.Upstreams[0].Name, c.DryRun)
	}
	fmt.Fprintln(stdout, "anything else: no limit, to", c.Upstreams[0].Name)
	t := c.Timeouts.WithDefaults()
	rate := "off"
	if t.ClientBodyMinRate > 0 {
		rate = strconv.FormatInt(t.ClientBodyMinRate, 10) + " B/s"
	}
	fmt.Fprintf(stdout, "timeouts: client_header %v, client_body %v (min rate %s), send %v, keepalive %v\n", t.ClientHeader, t.ClientBody, rate, t.Send, t.Keepalive)
	return 0
}

// printRoute prints rt and its limits as sluice proxy -check shows them:
// to defaultUpstream when rt names none, each limit dry run when dryRun.
func printRoute(stdout io.Writer, rt gateway.Route, defaultUpstream string, dryRun bool) {
	up := rt.Upstream
	if up == "" {
		up = defaultUpstream
	}
	fmt.Fprintf(stdout, "route %s %q -> %s", rt.Name, rt.Patterns, up)
	if len(rt.Methods) > 0 {
		fmt.Fprintf(stdout, " (methods %s; others 403)", strings.Join(rt.Methods, ", "))
	}
	if rt.Priority != adaptive.Default {
		fmt.Fprintf(stdout, " priority %s", rt.Priority)
	}
	fmt.Fprintln(stdout)
	for _, p := range rt.Policies {
		if p.Queue != nil {
			q := p.Queue
			mode := "delay all excess"
			switch {
			case q.NoDelay:
				mode = "nodelay"
			case q.Delay > 0:
				mode = fmt.Sprintf("delay=%d", q.Delay)
			}
			fmt.Fprintf(stdout, "  limit %s: queue %d per %v, burst %d, %s", p.Name, q.Rate, q.Period, q.Burst, mode)
		} else {
			fmt.Fprintf(stdout, "  limit %s: %v %d per %v, burst %d", p.Name, p.Limit.Algorithm, p.Limit.Rate, p.Limit.Period, p.Limit.Burst)
		}
		if p.Shadow || dryRun {
			fmt.Fprint(stdout, " (dry run)")
		}
		fmt.Fprintln(stdout)
	}
	for _, cp := range rt.Concurrency {
		fmt.Fprintf(stdout, "  conns %s: at most %d in flight", cp.Name, cp.Max)
		if cp.Shadow || dryRun {
			fmt.Fprint(stdout, " (dry run)")
		}
		fmt.Fprintln(stdout)
	}
}

// loadProxyFile reads the config (or starts from nothing) and applies
// -upstream.
func loadProxyFile(ctx context.Context, o proxyOptions) (*gateway.File, error) {
	f := &gateway.File{}
	if o.configPath != "" {
		var err error
		// A file that cannot be read in 10 s (a stuck network mount) is an
		// error, not a wedged start or reload.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if f, err = gateway.LoadFile(rctx, o.configPath); err != nil {
			return nil, err
		}
	}
	t, ft := o.timeouts, &f.Config.Timeouts
	ft.ClientHeader = cmp.Or(t.ClientHeader, ft.ClientHeader)
	ft.ClientBody = cmp.Or(t.ClientBody, ft.ClientBody)
	ft.ClientBodyMinRate = cmp.Or(t.ClientBodyMinRate, ft.ClientBodyMinRate)
	ft.Send = cmp.Or(t.Send, ft.Send)
	ft.Keepalive = cmp.Or(t.Keepalive, ft.Keepalive)
	f.Config.ClientMaxBodySize = cmp.Or(o.maxBodySize, f.Config.ClientMaxBodySize)
	if o.upstream != "" {
		u, err := url.Parse(o.upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("-upstream %q: want http:// or https:// and a host", o.upstream)
		}
		if len(f.Config.Upstreams) == 0 {
			f.Config.Upstreams = []gateway.Upstream{{Name: "upstream", PathSemantics: f.PathSemantics}}
		}
		f.Config.Upstreams[0].URL = u
	}
	return f, nil
}

// checkUpstream warns when an upstream cannot be reached at start-up; the
// proxy starts anyway (the upstream may come up later) and answers 502
// meanwhile.
func checkUpstream(ctx context.Context, log *slog.Logger, u gateway.Upstream) {
	host := u.URL.Host
	if u.URL.Port() == "" {
		port := "80"
		if u.URL.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.URL.Hostname(), port)
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		log.Warn("upstream unreachable at start-up; starting anyway (requests get 502 until it answers)", "upstream", u.Name, "addr", host, "err", err)
		return
	}
	c.Close()
}

// minLogKeySecret is the shortest secret -log-key-secret-file takes: with
// fewer bytes, trying every secret for every IPv4 address would again be
// within reach.
const minLogKeySecret = 16

// readLogKeySecret reads the secret of -log-key-secret-file (a regular
// file, 4 KiB at most, white space around it trimmed); "" gives nil (a
// random secret per process, see httplimit.Config.LogKeySecret). Its
// errors start with the flag.
func readLogKeySecret(ctx context.Context, path string) ([]byte, error) {
	b, err := readKeySecret(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("-log-key-secret-file %w", err)
	}
	return b, nil
}

// readKeySecret is readLogKeySecret with errors that start with the path.
func readKeySecret(ctx context.Context, path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := safefile.Read(ctx, path, 4<<10)
	if err != nil {
		return nil, err // safefile's errors start with the path
	}
	b = bytes.TrimSpace(b)
	if len(b) < minLogKeySecret {
		return nil, fmt.Errorf("%s: %d bytes of secret, want %d at least (such as the output of openssl rand -hex 32)", path, len(b), minLogKeySecret)
	}
	return b, nil
}
