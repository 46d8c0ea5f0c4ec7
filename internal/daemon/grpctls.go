package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/safefile"
)

// GRPCTLSOptions are the gRPC listener's TLS settings: envoyproxy/ratelimit's
// GRPC_SERVER_USE_TLS, GRPC_SERVER_TLS_CERT and _KEY, GRPC_CLIENT_TLS_CACERT
// and _SAN, as flags whose defaults are those variables. The zero value is
// plaintext gRPC.
type GRPCTLSOptions struct {
	Use                            bool
	Cert, Key, ClientCA, ClientSAN string
}

// MaxTLSFileBytes caps each certificate, key and CA file: a PEM bundle of
// a few hundred CAs is far below it.
const MaxTLSFileBytes = safefile.MaxPEMBytes

// LoadCertPool reads the PEM file of CAs at path as every TLS file is read
// (safefile: a regular file of at most MaxTLSFileBytes, within ctx) into a
// pool of those CAs alone; a file without a PEM certificate is an error.
func LoadCertPool(ctx context.Context, path string) (*x509.CertPool, error) {
	pem, err := safefile.Read(ctx, path, MaxTLSFileBytes)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// tlsReloadEvery is how often, at most, the files are looked at again:
// on a handshake at least this long after the last look.
const tlsReloadEvery = time.Second

// tlsReadTimeout bounds the reading of the files (safefile.Read).
const tlsReadTimeout = 5 * time.Second

// flags defines the TLS flags on fs, their defaults from the environment
// (a GRPC_SERVER_USE_TLS that is not a boolean goes to errs).
func (o *GRPCTLSOptions) flags(fs *flag.FlagSet, errs *envflag.Errs) {
	errs.Bools("GRPC_SERVER_USE_TLS")
	fs.BoolVar(&o.Use, "grpc-tls", envflag.Bool("GRPC_SERVER_USE_TLS", false),
		"gRPC: serve TLS with -grpc-tls-cert and -grpc-tls-key (re-read when they change on disk)")
	fs.StringVar(&o.Cert, "grpc-tls-cert", os.Getenv("GRPC_SERVER_TLS_CERT"),
		"gRPC: the server's certificate chain, a PEM file")
	fs.StringVar(&o.Key, "grpc-tls-key", os.Getenv("GRPC_SERVER_TLS_KEY"),
		"gRPC: the server's private key, a PEM file")
	fs.StringVar(&o.ClientCA, "grpc-tls-client-ca", os.Getenv("GRPC_CLIENT_TLS_CACERT"),
		"gRPC: require client certificates signed by these CAs (a PEM file; mTLS)")
	fs.StringVar(&o.ClientSAN, "grpc-tls-client-san", os.Getenv("GRPC_CLIENT_TLS_SAN"),
		"gRPC: with -grpc-tls-client-ca, the client certificate must carry this SAN (a DNS name, IP, URI such as a SPIFFE ID, or email)")
}

// check refuses the settings that do not go together: TLS without both
// files of its pair, a client CA or SAN without TLS (plaintext would be
// served to clients the operator meant to verify), and a SAN without a
// client CA (nothing would be verified).
func (o GRPCTLSOptions) check() error {
	switch {
	case o.Use && (o.Cert == "" || o.Key == ""):
		return errors.New("-grpc-tls (GRPC_SERVER_USE_TLS) needs -grpc-tls-cert and -grpc-tls-key (GRPC_SERVER_TLS_CERT, GRPC_SERVER_TLS_KEY)")
	case !o.Use && (o.ClientCA != "" || o.ClientSAN != ""):
		return errors.New("-grpc-tls-client-ca and -grpc-tls-client-san (GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN) verify clients over TLS: set -grpc-tls (GRPC_SERVER_USE_TLS=true) too, or unset them")
	case o.ClientSAN != "" && o.ClientCA == "":
		return errors.New("-grpc-tls-client-san (GRPC_CLIENT_TLS_SAN) needs -grpc-tls-client-ca (GRPC_CLIENT_TLS_CACERT): without it no client certificate is asked for")
	}
	return nil
}

// notActedOn returns the flags of a server pair given without -grpc-tls,
// which serve names in its start-up line (as envoyproxy/ratelimit, it
// serves plaintext then).
func (o GRPCTLSOptions) notActedOn() []string {
	if o.Use {
		return nil
	}
	var out []string
	if o.Cert != "" {
		out = append(out, "-grpc-tls-cert")
	}
	if o.Key != "" {
		out = append(out, "-grpc-tls-key")
	}
	return out
}

// GRPCTLS is the gRPC listener's TLS: the certificate, key and client CA
// read from their files, read again when one of them has changed (its
// identity, size or modification time; looked at on a handshake, once a
// second at most). A replacement that does not load keeps the running
// config and is logged once. It is safe for concurrent use. The zero value
// is not usable: start with NewGRPCTLS.
type GRPCTLS struct {
	o   GRPCTLSOptions
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex // held by the one handshake that looks at the files
	checked time.Time
	seen    []os.FileInfo // of the files last loaded or tried, in files' order

	cur atomic.Pointer[tls.Config]
}

// NewGRPCTLS loads the files of o (o.use must be true) and returns the
// TLS of the gRPC listener; now is its clock. An error here is serve's
// exit: a bad certificate at start-up is never served around.
func NewGRPCTLS(ctx context.Context, o GRPCTLSOptions, log *slog.Logger, now func() time.Time) (*GRPCTLS, error) {
	g := &GRPCTLS{o: o, log: log, now: now, checked: now()}
	g.seen = g.stat()
	cfg, err := g.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("gRPC TLS: %w", err)
	}
	g.cur.Store(cfg)
	return g, nil
}

// ServerOption returns the gRPC server option that serves g's TLS.
func (g *GRPCTLS) ServerOption() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(&tls.Config{GetConfigForClient: g.configForClient}))
}

// files returns the paths g reads: the certificate, the key and the
// client CA when there is one.
func (g *GRPCTLS) files() []string {
	f := []string{g.o.Cert, g.o.Key}
	if g.o.ClientCA != "" {
		f = append(f, g.o.ClientCA)
	}
	return f
}

// configForClient is tls.Config.GetConfigForClient: the running config,
// after looking at the files when the last look is a second old. While
// one handshake looks, the others take the running config.
func (g *GRPCTLS) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	if g.mu.TryLock() {
		if now := g.now(); now.Sub(g.checked) >= tlsReloadEvery {
			g.checked = now
			g.reloadIfChanged()
		}
		g.mu.Unlock()
	}
	return g.cur.Load(), nil
}

// stat returns the os.Stat of each file, nil for one that cannot be
// stat'ed.
func (g *GRPCTLS) stat() []os.FileInfo {
	var out []os.FileInfo
	for _, p := range g.files() {
		fi, _ := os.Stat(p)
		out = append(out, fi)
	}
	return out
}

// sameFile reports whether a and b are the same file, unchanged: the same
// identity (device and inode), size and modification time, or both nil.
func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// reloadIfChanged loads the files again when one changed since they were
// last loaded or tried; g.mu is held.
func (g *GRPCTLS) reloadIfChanged() {
	now := g.stat()
	if slices.EqualFunc(now, g.seen, sameFile) {
		return
	}
	g.seen = now // a bad set is tried once, and again when a file changes
	ctx, cancel := context.WithTimeout(context.Background(), tlsReadTimeout)
	defer cancel()
	cfg, err := g.load(ctx)
	if err != nil {
		g.log.Error("gRPC TLS: the certificate files changed and do not load; keeping the running ones", "err", err)
		return
	}
	g.cur.Store(cfg)
	g.log.Info("gRPC TLS: certificate files reloaded", "cert", g.o.Cert, "client_ca", g.o.ClientCA)
}

// load reads the files and returns the server config they make.
func (g *GRPCTLS) load(ctx context.Context) (*tls.Config, error) {
	pair, err := safefile.ReadKeyPair(ctx, g.o.Cert, g.o.Key)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if g.o.ClientCA == "" {
		return cfg, nil
	}
	// Only the file's CAs: unlike envoyproxy/ratelimit, which adds them to
	// the system's, a certificate from a public CA does not pass.
	pool, err := LoadCertPool(ctx, g.o.ClientCA)
	if err != nil {
		return nil, err
	}
	cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, pool
	if san := g.o.ClientSAN; san != "" {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !hasSAN(cs.PeerCertificates[0], san) {
				return fmt.Errorf("the client certificate does not carry the SAN %q", san)
			}
			return nil
		}
	}
	return cfg, nil
}

// hasSAN reports whether c carries san: a DNS name or IP address as
// x509.Certificate.VerifyHostname matches them (wildcards included), a
// URI (a SPIFFE ID) or an email address, equal.
func hasSAN(c *x509.Certificate, san string) bool {
	if c.VerifyHostname(san) == nil {
		return true
	}
	for _, u := range c.URIs {
		if u.String() == san {
			return true
		}
	}
	return slices.Contains(c.EmailAddresses, san)
}

// Describe returns what serve's banner says of o after the gRPC service's
// name: "" for plaintext, ", TLS", or ", mTLS" with a client CA.
func (o GRPCTLSOptions) Describe() string {
	switch {
	case !o.Use:
		return ""
	case o.ClientCA != "":
		return ", mTLS"
	}
	return ", TLS"
}
