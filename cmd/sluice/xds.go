package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/ratelimitenv"
	"github.com/sluicehq/sluice/internal/safefile"
	"github.com/sluicehq/sluice/xdsconfig"
)

// xdsEnv are envoyproxy/ratelimit's variables of its xDS config provider,
// which serve acts on under CONFIG_TYPE=GRPC_XDS_SOTW and names as not
// acted on under CONFIG_TYPE=FILE (see xdsNotActedOn); xdsTLSEnv are
// those that CONFIG_GRPC_XDS_SERVER_USE_TLS turns on. Both are read from
// ratelimitenv's table.
var (
	xdsEnv    = ratelimitenv.Names(ratelimitenv.InGroup("xds"))
	xdsTLSEnv = ratelimitenv.Names(ratelimitenv.XDSTLS)
)

// xdsSettings are serve's settings under CONFIG_TYPE=GRPC_XDS_SOTW, from
// envoyproxy/ratelimit's variables with its defaults.
type xdsSettings struct {
	client xdsconfig.Config // without Apply, Logger, Registerer and TLS
	// forceStart (FORCE_START_WITHOUT_INITIAL_CONFIG) serves at once with
	// no domains instead of waiting for the first config.
	forceStart bool
	useTLS     bool
	// The TLS files and the server name to verify; read by credentials.
	cert, key, ca, san string
}

// configIsXDS reads CONFIG_TYPE: false for FILE (or unset), true for
// GRPC_XDS_SOTW (any case); another value is recorded in e.
func configIsXDS(e *envflag.Errs) bool {
	return envflag.Parse(e, "CONFIG_TYPE", false, "FILE or GRPC_XDS_SOTW", func(v string) (bool, error) {
		switch {
		case strings.EqualFold(v, "FILE"):
			return false, nil
		case strings.EqualFold(v, "GRPC_XDS_SOTW"):
			return true, nil
		}
		return false, errors.New("unknown config type")
	})
}

// xdsFromEnv returns the xDS settings when CONFIG_TYPE is GRPC_XDS_SOTW,
// else nil; values that do not parse are recorded in e.
func xdsFromEnv(e *envflag.Errs) *xdsSettings {
	if !configIsXDS(e) {
		return nil
	}
	e.Bools("CONFIG_GRPC_XDS_SERVER_USE_TLS", "XDS_CLIENT_BACKOFF_JITTER", "FORCE_START_WITHOUT_INITIAL_CONFIG")
	x := &xdsSettings{
		useTLS:     envflag.Bool("CONFIG_GRPC_XDS_SERVER_USE_TLS", false),
		forceStart: envflag.Bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false),
		cert:       os.Getenv("CONFIG_GRPC_XDS_CLIENT_TLS_CERT"),
		key:        os.Getenv("CONFIG_GRPC_XDS_CLIENT_TLS_KEY"),
		ca:         os.Getenv("CONFIG_GRPC_XDS_SERVER_TLS_CACERT"),
		san:        os.Getenv("CONFIG_GRPC_XDS_SERVER_TLS_SAN"),
	}
	c := &x.client
	c.Target = envflag.String("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000")
	c.NodeID = envflag.String("CONFIG_GRPC_XDS_NODE_ID", "default")
	c.NodeMetadata = e.Pairs("CONFIG_GRPC_XDS_NODE_METADATA", "=")
	c.Headers = e.Pairs("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ":")
	c.ConnectRetry = e.Duration("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", xdsconfig.DefaultConnectRetry)
	def := xdsconfig.DefaultBackoff
	c.Backoff = xdsconfig.Backoff{
		Initial: e.Duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", def.Initial),
		Max:     e.Duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL", def.Max),
		Factor:  e.Float("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", def.Factor, 0, math.MaxFloat64, "a number, 0 or more"),
		Jitter:  envflag.Bool("XDS_CLIENT_BACKOFF_JITTER", def.Jitter),
	}
	if c.MaxMsgSize = e.Int("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", 0); c.MaxMsgSize < 0 {
		*e = append(*e, fmt.Errorf("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES=%d: want 0 (gRPC's default, 4 MiB) or more", c.MaxMsgSize))
	}
	return x
}

// xdsNotActedOn adjusts serve's list of variables set and not acted on
// (ignored, from notActedOn) to the config type: under xDS,
// FORCE_START_WITHOUT_INITIAL_CONFIG is acted on, and the TLS variables
// are not while CONFIG_GRPC_XDS_SERVER_USE_TLS is false; under FILE, every
// xDS variable that is set is not acted on.
func xdsNotActedOn(x *xdsSettings, ignored []string) []string {
	var add []string
	switch {
	case x == nil:
		add = xdsEnv
	case !x.useTLS:
		add = xdsTLSEnv
	}
	for _, name := range add {
		if _, ok := os.LookupEnv(name); ok && !slices.Contains(ignored, name) {
			ignored = append(ignored, name)
		}
	}
	if x != nil {
		ignored = slices.DeleteFunc(ignored, func(n string) bool { return n == "FORCE_START_WITHOUT_INITIAL_CONFIG" })
	}
	return ignored
}

// credentials returns the TLS of the connection to the xDS server, nil
// for plaintext: the CA file's certificates as the roots (the system's
// without one), the client pair if one is given (both files or
// neither), and the SAN as the name to verify (the server URL's host
// without one). The files are read once, here, each at most
// daemon.MaxTLSFileBytes (the CAs by daemon.LoadCertPool, the pair by safefile.ReadKeyPair, as every TLS file is).
func (x *xdsSettings) credentials(ctx context.Context) (credentials.TransportCredentials, error) {
	if !x.useTLS {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: x.san}
	if x.ca != "" {
		pool, err := daemon.LoadCertPool(ctx, x.ca)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_SERVER_TLS_CACERT: %w", err)
		}
		tc.RootCAs = pool
	}
	if (x.cert == "") != (x.key == "") {
		return nil, errors.New("CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY: set both or neither")
	}
	if x.cert != "" {
		pair, err := safefile.ReadKeyPair(ctx, x.cert, x.key)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_TLS_CERT, CONFIG_GRPC_XDS_CLIENT_TLS_KEY: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(tc), nil
}

// checkXDS refuses a config path given with -config under xDS, which
// would otherwise be ignored; RUNTIME_ROOT, which only sets -config's
// default, is logged as not used.
func (s *serveApp) checkXDS() error {
	if s.xds == nil {
		return nil
	}
	if envflag.IsSet(s.fs, "config") {
		return daemon.ExitCode(2, "-config and CONFIG_TYPE=GRPC_XDS_SOTW: the config comes from files or from the xDS server, not both")
	}
	if s.o.configPath != "" {
		s.log.Warn("CONFIG_TYPE=GRPC_XDS_SOTW: the config comes from the xDS server; RUNTIME_ROOT's files are not read", "RUNTIME_ROOT", os.Getenv("RUNTIME_ROOT"))
	}
	s.o.configPath = ""
	return nil
}

// noDomains is the config serve starts with under xDS before the first
// config arrives (served only with FORCE_START_WITHOUT_INITIAL_CONFIG):
// every descriptor is unmatched and allowed, as envoyproxy/ratelimit
// answers a config of no domains.
func noDomains() *config.Config {
	c, _ := config.New() // no domains cannot collide
	return c
}

// xdsWaitLog is how often serve logs that it is still waiting for the
// first config from the xDS server.
const xdsWaitLog = 30 * time.Second

// startXDS subscribes to the xDS server, each config it sends going
// through apply as a reloaded file's does (ACKed if it applies, NACKed
// with the error if not, the running config kept), and waits for the
// first config unless FORCE_START_WITHOUT_INITIAL_CONFIG: serve's
// listeners open only once there are rules to serve. The subscription
// ends when serve does.
func (s *serveApp) startXDS(ctx context.Context, a *daemon.App) error {
	creds, err := s.xds.credentials(ctx)
	if err != nil {
		return daemon.ExitCode(2, err)
	}
	cfg := s.xds.client
	cfg.TLS, cfg.Logger, cfg.Registerer = creds, s.log, s.reg
	cfg.Options = s.o.rules.load // MERGE_DOMAIN_CONFIG, as for files
	cfg.Apply = func(_ context.Context, c *config.Config) error {
		err := s.apply(c)
		s.svc.ConfigLoaded(err)
		return err
	}
	cl, err := xdsconfig.New(cfg)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(rctx) }()
	a.OnClose(func() { cancel(); <-done })
	if s.xds.forceStart {
		s.log.Info("xds: serving with no domains until the first config (FORCE_START_WITHOUT_INITIAL_CONFIG)", "server", cfg.Target)
		return nil
	}
	s.log.Info("xds: waiting for the first config before serving", "server", cfg.Target, "node", cfg.NodeID)
	tick := time.NewTicker(xdsWaitLog)
	defer tick.Stop()
	for {
		select {
		case <-cl.Ready():
			return nil
		case <-ctx.Done():
			return daemon.StoppedEarly(ctx, ctx.Err())
		case <-tick.C:
			s.log.Warn("xds: still waiting for the first config; not serving yet", "server", cfg.Target)
		}
	}
}
