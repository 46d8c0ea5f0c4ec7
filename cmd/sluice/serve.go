package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/service"
)

// exampleConfig is what `sluice serve` runs with no config at all.
//
//go:embed example.yaml
var exampleConfig []byte

// ignoredEnv are envoyproxy/ratelimit settings that Sluice accepts and does
// not act on (yet); present ones are named in one start-up log line.
var ignoredEnv = []string{
	"DEBUG_HOST", "DEBUG_PORT", "RUNTIME_WATCH_ROOT", "RUNTIME_IGNOREDOTFILES", "BACKEND_TYPE",
	"REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_TLS", "LOCAL_CACHE_SIZE_IN_BYTES", "USE_STATSD", "LOG_LEVEL",
}

// serveOptions are serve's settings, from flags over envoyproxy/ratelimit's
// environment variables over defaults.
type serveOptions struct {
	configPath, store, httpAddr, grpcAddr, headers, prefix, failure string
	shadow                                                          bool
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// runServe runs the service until ctx ends.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o serveOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defConfig := ""
	if root := os.Getenv("RUNTIME_ROOT"); root != "" {
		defConfig = filepath.Join(root, os.Getenv("RUNTIME_SUBDIRECTORY"), os.Getenv("RUNTIME_APPDIRECTORY"), "config")
	}
	fs.StringVar(&o.configPath, "config", defConfig, "a config file or directory (envoyproxy/ratelimit's YAML); default: the built-in example")
	fs.StringVar(&o.store, "store", env("REDIS_URL", "memory"), "memory, or a Redis URL (redis://, rediss://, redis+cluster://, redis+sentinel://)")
	fs.StringVar(&o.httpAddr, "http-addr", net.JoinHostPort(env("HOST", ""), env("PORT", "8080")), "HTTP address: POST /json, /healthcheck, /metrics")
	fs.StringVar(&o.grpcAddr, "grpc-addr", net.JoinHostPort(env("GRPC_HOST", ""), env("GRPC_PORT", "8081")), "gRPC address: envoy.service.ratelimit.v3.RateLimitService")
	defHeaders := "draft11"
	if v := os.Getenv("LIMIT_RESPONSE_HEADERS_ENABLED"); v == "true" {
		defHeaders = "legacy"
	}
	fs.StringVar(&o.headers, "headers", defHeaders, "response_headers_to_add: off, legacy or draft11")
	fs.StringVar(&o.prefix, "prefix", env("CACHE_KEY_PREFIX", ""), "prefix of every store key")
	fs.StringVar(&o.failure, "failure-mode", "open", "with Redis, what to do when it fails: open, closed or local")
	fs.BoolVar(&o.shadow, "shadow", os.Getenv("SHADOW_MODE") == "true", "shadow mode: decide and count, never refuse")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var ignored []string
	for _, name := range ignoredEnv {
		if _, ok := os.LookupEnv(name); ok {
			ignored = append(ignored, name)
		}
	}
	if len(ignored) > 0 {
		log.Info("accepted and not acted on", "env", strings.Join(ignored, ","))
	}

	rules, err := loadRules(o.configPath)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 1
	}
	headers, err := service.ParseHeaderMode(o.headers)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	limiter, closeStore, err := openStore(ctx, o, log)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 1
	}
	defer closeStore()
	reg := prometheus.NewRegistry()
	svc, err := service.New(service.Config{Limiter: limiter, Rules: rules, Prefix: o.prefix, ShadowMode: o.shadow,
		Headers: headers, Logger: log, Registerer: reg})
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 1
	}

	httpLn, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 1
	}
	grpcLn, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		httpLn.Close()
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 1
	}
	hs := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	gs := grpc.NewServer()
	svc.RegisterGRPC(gs)
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(httpLn) }()
	go func() { errc <- gs.Serve(grpcLn) }()

	// Reloads on SIGHUP: registered before the addresses are printed, so
	// that whoever reads them can signal at once.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	source := o.configPath
	if source == "" {
		source = "the built-in example config"
	}
	fmt.Fprintf(stdout, "sluice %s serving %s on store %s\n", buildVersion(), source, storeName(o.store))
	fmt.Fprintf(stdout, "  HTTP  http://%s  (POST /json, GET /healthcheck, GET /metrics)\n", localAddr(httpLn.Addr()))
	fmt.Fprintf(stdout, "  gRPC  %s  (envoy.service.ratelimit.v3.RateLimitService)\n", grpcLn.Addr())
	if o.configPath == "" {
		fmt.Fprintf(stdout, "Try it: the example allows 3 per minute per user, so the 4th is a 429:\n")
		fmt.Fprintf(stdout, "  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code}\\n' -XPOST http://%s/json -d '{\"domain\":\"example\",\"descriptors\":[{\"entries\":[{\"key\":\"user\",\"value\":\"alice\"}]}]}'; done\n", localAddr(httpLn.Addr()))
	}

	code := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			if o.configPath == "" {
				log.Info("reload: nothing to reload (the built-in example config)")
				continue
			}
			r, err := loadRules(o.configPath)
			if err != nil {
				log.Error("reload failed; keeping the running config", "err", err)
				continue
			}
			svc.SetRules(r)
			log.Info("reloaded", "config", o.configPath)
		case err := <-errc:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(stderr, "sluice serve:", err)
				code = 1
			}
			break loop
		}
	}
	svc.SetServing(false)
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs.Shutdown(shutdown)
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-shutdown.Done():
		gs.Stop()
	}
	return code
}

// loadRules loads the config at path, or the built-in example when path is
// empty.
func loadRules(path string) (*config.Config, error) {
	if path != "" {
		return config.Load(path)
	}
	d, err := config.Parse("built-in example", exampleConfig)
	if err != nil {
		return nil, err
	}
	return config.New(d)
}

// openStore opens the memory store or Redis, the latter behind failsafe.
func openStore(ctx context.Context, o serveOptions, log *slog.Logger) (sluice.Limiter, func(), error) {
	if o.store == "" || o.store == "memory" {
		m := memstore.New(memstore.Config{})
		return m, func() { m.Close() }, nil
	}
	mode, err := failsafe.ParseMode(o.failure)
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rs, err := redisstore.New(cctx, redisstore.Config{URL: o.store})
	if err != nil {
		return nil, nil, err
	}
	local := memstore.New(memstore.Config{})
	fs, err := failsafe.New(failsafe.Config{Primary: rs, Mode: mode, Local: local, Logger: log})
	if err != nil {
		rs.Close()
		local.Close()
		return nil, nil, err
	}
	return fs, func() { rs.Close(); local.Close() }, nil
}

// storeName describes the store without its password.
func storeName(s string) string {
	if s == "" || s == "memory" {
		return "memory"
	}
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			return s[:i+3] + "…@" + rest[at+1:]
		}
	}
	return s
}

// localAddr turns a wildcard listen address into one a curl on this machine
// can reach.
func localAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
