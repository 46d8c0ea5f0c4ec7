package daemon

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/safefile"
)

// AdminAuth is how an admin listener authenticates its callers, and how
// its live page shows keys: the flags serve and proxy share. The zero
// value is no token file, no TLS, hashed keys on the page, a login link
// printed at start-up and the default connection cap
// (defaultAdminMaxConns).
type AdminAuth struct {
	TokenFile               string // -admin-token-file
	tlsCert, tlsKey, CAFile string // -admin-tls-cert, -admin-tls-key, -admin-client-ca
	RawKeys                 bool   // -admin-raw-keys
	// NoLoginLink is -admin-login-link=false: start-up prints no one-time
	// login link (sluice admin login and the token form still sign a
	// browser in).
	NoLoginLink bool
	maxConns    int // -admin-max-conns; 0: defaultAdminMaxConns
}

// notBool is a boolean flag that sets *p to the opposite of its value, so
// that a flag on by default fills a field whose zero value is on.
type notBool struct{ p *bool }

func (f notBool) String() string {
	if f.p == nil {
		return "false"
	}
	return strconv.FormatBool(!*f.p)
}

func (f notBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*f.p = !b
	return nil
}

func (f notBool) IsBoolFlag() bool { return true }

// AdminTokenEnv is the environment variable that holds the admin API's
// bearer token (serve's, and the admin command's), when no file is given.
const AdminTokenEnv = "SLUICE_ADMIN_TOKEN"

// adminAuthFlags are the names of AdminAuth's flags.
var adminAuthFlags = []string{"admin-token-file", "admin-tls-cert", "admin-tls-key", "admin-client-ca", "admin-raw-keys", "admin-login-link", "admin-max-conns"}

// Flags defines the admin authentication flags on fs.
func (o *AdminAuth) Flags(fs *flag.FlagSet) {
	fs.StringVar(&o.TokenFile, "admin-token-file", "", "file holding the admin API's bearer token (else "+AdminTokenEnv+")")
	fs.StringVar(&o.tlsCert, "admin-tls-cert", "", "the admin listener's TLS certificate (PEM); with -admin-tls-key it serves HTTPS")
	fs.StringVar(&o.tlsKey, "admin-tls-key", "", "the admin listener's TLS key (PEM)")
	fs.StringVar(&o.CAFile, "admin-client-ca", "", "CA bundle (PEM) that admin clients' certificates must chain to (mTLS); such a client needs no token")
	fs.BoolVar(&o.RawKeys, "admin-raw-keys", false, "the admin listener's live page (/page) shows the keys it lists as they are, descriptor values included; default: hashed")
	fs.Var(notBool{&o.NoLoginLink}, "admin-login-link", "print a one-time link that opens the live page in a browser at start-up (a credential for 5 minutes, in the log); false: none (sluice admin login mints one)")
	fs.IntVar(&o.maxConns, "admin-max-conns", 0, "the admin listener's open connections at most: at the cap the one idle longest gives way to a new one, else it waits; 0: 5% of the open-file limit, 16 to 256; negative: no cap")
}

// CheckOff refuses admin authentication flags given with the admin
// listener off.
func (o *AdminAuth) CheckOff(fs *flag.FlagSet) error {
	for _, name := range adminAuthFlags {
		if envflag.IsSet(fs, name) {
			return ExitCode(2, fmt.Sprintf("-%s needs -admin-addr (the admin API is off)", name))
		}
	}
	return nil
}

// Check refuses TLS flags that do not go together, and a token given
// twice.
func (o *AdminAuth) Check() error {
	if (o.tlsCert == "") != (o.tlsKey == "") || o.CAFile != "" && o.tlsCert == "" {
		return ExitCode(2, "-admin-tls-cert and -admin-tls-key go together, and -admin-client-ca needs them")
	}
	if o.TokenFile != "" && os.Getenv(AdminTokenEnv) != "" {
		return ExitCode(2, "both -admin-token-file and "+AdminTokenEnv+" are set: give one")
	}
	return nil
}

// ReadAdminToken returns the admin API's bearer token as serve and the
// admin command both read it: the content of file when one is named (a
// regular file of 4 KiB at most, through safefile), else AdminTokenEnv's
// value; surrounding white space removed either way, "" for none.
func ReadAdminToken(ctx context.Context, file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(AdminTokenEnv)), nil
	}
	b, err := safefile.Read(ctx, file, 4<<10)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Token reads the admin token (ReadAdminToken); nil for none. A named
// file that holds nothing, or a token shorter than 16 bytes, is refused.
func (o *AdminAuth) Token(ctx context.Context) ([]byte, error) {
	t, err := ReadAdminToken(ctx, o.TokenFile)
	if err != nil {
		return nil, err
	}
	if t == "" && o.TokenFile != "" {
		return nil, fmt.Errorf("%s is empty", o.TokenFile)
	}
	if len(t) > 0 && len(t) < 16 {
		return nil, errors.New("the admin token is shorter than 16 bytes")
	}
	return []byte(t), nil
}

// APIAuth reads the token and returns the admin API's authentication;
// ok is false when there is neither a token nor a client CA, so that no
// caller could be let in.
func (o *AdminAuth) APIAuth(ctx context.Context) (cfg admin.Config, ok bool, err error) {
	tok, err := o.Token(ctx)
	if err != nil {
		return admin.Config{}, false, ExitCode(2, "admin token:", err)
	}
	return admin.Config{Token: tok, ClientCerts: o.CAFile != ""}, len(tok) > 0 || o.CAFile != "", nil
}

// TLSConfig loads the admin listener's TLS, nil without -admin-tls-cert.
func (o *AdminAuth) TLSConfig(ctx context.Context) (*tls.Config, error) {
	if o.tlsCert == "" {
		return nil, nil
	}
	pair, err := safefile.ReadKeyPair(ctx, o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if o.CAFile == "" {
		return cfg, nil
	}
	pool, err := LoadCertPool(ctx, o.CAFile)
	if err != nil {
		return nil, err
	}
	// A client may still come with a token instead: verify a certificate
	// when one is sent.
	cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	return cfg, nil
}

// Preflight runs, without listening, the checks the admin listener's
// start-up runs on these flags, with the same exit status and message:
// the flags together (Check), the token's file or variable (APIAuth) and
// the TLS certificate, key and client CA files (TLSConfig). A -check
// command that calls it refuses what start-up would.
func (o *AdminAuth) Preflight(ctx context.Context) error {
	if err := o.Check(); err != nil {
		return err
	}
	if _, _, err := o.APIAuth(ctx); err != nil {
		return err
	}
	if _, err := o.TLSConfig(ctx); err != nil {
		return ExitCode(2, "admin TLS:", err)
	}
	return nil
}

// ServeAdminOn serves hs on ln, the admin listener, with TLS when
// -admin-tls-cert is set and at most -admin-max-conns connections (the
// public listeners' cap, CapConns); pg (nil: none) ends its event streams
// when hs shuts down. It returns the listener's URL scheme.
func (o *AdminAuth) ServeAdminOn(ctx context.Context, a *App, ln net.Listener, hs *http.Server, pg *page.Page) (string, error) {
	tc, err := o.TLSConfig(ctx)
	if err != nil {
		return "", ExitCode(2, "admin TLS:", err)
	}
	// The public listeners' cap (see CapConns), on the connections
	// before TLS: so many clients idle on this port cannot take the
	// descriptors the public ones need.
	ln, hs.ConnState = CapConns(ln, cmp.Or(o.maxConns, defaultAdminMaxConns()))
	scheme := "http"
	if tc != nil {
		ln, scheme = tls.NewListener(ln, tc), "https"
	}
	if pg != nil {
		hs.RegisterOnShutdown(pg.Close) // its event streams would hold the drain
	}
	a.ServeHTTP(hs, ln)
	return scheme, nil
}
