package main

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
	"strings"

	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/safefile"
)

// adminAuth is how an admin listener authenticates its callers, and how
// its live page shows keys: the flags serve and proxy share.
type adminAuth struct {
	tokenFile               string // -admin-token-file
	tlsCert, tlsKey, caFile string // -admin-tls-cert, -admin-tls-key, -admin-client-ca
	rawKeys                 bool   // -admin-raw-keys
	maxConns                int    // -admin-max-conns; 0: defaultAdminMaxConns
}

// adminAuthFlags are the names of adminAuth's flags.
var adminAuthFlags = []string{"admin-token-file", "admin-tls-cert", "admin-tls-key", "admin-client-ca", "admin-raw-keys", "admin-max-conns"}

// flags defines the admin authentication flags on fs.
func (o *adminAuth) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.tokenFile, "admin-token-file", "", "file holding the admin API's bearer token (else "+adminTokenEnv+")")
	fs.StringVar(&o.tlsCert, "admin-tls-cert", "", "the admin listener's TLS certificate (PEM); with -admin-tls-key it serves HTTPS")
	fs.StringVar(&o.tlsKey, "admin-tls-key", "", "the admin listener's TLS key (PEM)")
	fs.StringVar(&o.caFile, "admin-client-ca", "", "CA bundle (PEM) that admin clients' certificates must chain to (mTLS); such a client needs no token")
	fs.BoolVar(&o.rawKeys, "admin-raw-keys", false, "the admin listener's live page (/page) shows the keys it lists as they are, descriptor values included; default: hashed")
	fs.IntVar(&o.maxConns, "admin-max-conns", 0, "the admin listener's open connections at most: at the cap the one idle longest gives way to a new one, else it waits; 0: 5% of the open-file limit, 16 to 256; negative: no cap")
}

// checkOff refuses admin authentication flags given with the admin
// listener off.
func (o *adminAuth) checkOff(fs *flag.FlagSet) error {
	for _, name := range adminAuthFlags {
		if envflag.IsSet(fs, name) {
			return exitCode(2, fmt.Sprintf("-%s needs -admin-addr (the admin API is off)", name))
		}
	}
	return nil
}

// check refuses TLS flags that do not go together, and a token given
// twice.
func (o *adminAuth) check() error {
	if (o.tlsCert == "") != (o.tlsKey == "") || o.caFile != "" && o.tlsCert == "" {
		return exitCode(2, "-admin-tls-cert and -admin-tls-key go together, and -admin-client-ca needs them")
	}
	if o.tokenFile != "" && os.Getenv(adminTokenEnv) != "" {
		return exitCode(2, "both -admin-token-file and "+adminTokenEnv+" are set: give one")
	}
	return nil
}

// readAdminToken returns the admin API's bearer token as serve and the
// admin command both read it: the content of file when one is named (a
// regular file of 4 KiB at most, through safefile), else adminTokenEnv's
// value; surrounding white space removed either way, "" for none.
func readAdminToken(ctx context.Context, file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(adminTokenEnv)), nil
	}
	b, err := safefile.Read(ctx, file, 4<<10)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// token reads the admin token (readAdminToken); nil for none. A named
// file that holds nothing, or a token shorter than 16 bytes, is refused.
func (o *adminAuth) token(ctx context.Context) ([]byte, error) {
	t, err := readAdminToken(ctx, o.tokenFile)
	if err != nil {
		return nil, err
	}
	if t == "" && o.tokenFile != "" {
		return nil, fmt.Errorf("%s is empty", o.tokenFile)
	}
	if len(t) > 0 && len(t) < 16 {
		return nil, errors.New("the admin token is shorter than 16 bytes")
	}
	return []byte(t), nil
}

// apiAuth reads the token and returns the admin API's authentication;
// ok is false when there is neither a token nor a client CA, so that no
// caller could be let in.
func (o *adminAuth) apiAuth(ctx context.Context) (cfg admin.Config, ok bool, err error) {
	tok, err := o.token(ctx)
	if err != nil {
		return admin.Config{}, false, exitCode(2, "admin token:", err)
	}
	return admin.Config{Token: tok, ClientCerts: o.caFile != ""}, len(tok) > 0 || o.caFile != "", nil
}

// tlsConfig loads the admin listener's TLS, nil without -admin-tls-cert.
func (o *adminAuth) tlsConfig(ctx context.Context) (*tls.Config, error) {
	if o.tlsCert == "" {
		return nil, nil
	}
	pair, err := safefile.ReadKeyPair(ctx, o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if o.caFile == "" {
		return cfg, nil
	}
	pool, err := loadCertPool(ctx, o.caFile)
	if err != nil {
		return nil, err
	}
	// A client may still come with a token instead: verify a certificate
	// when one is sent.
	cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	return cfg, nil
}

// serveAdminOn serves hs on ln, the admin listener, with TLS when
// -admin-tls-cert is set and at most -admin-max-conns connections (the
// public listeners' cap, capConns); pg (nil: none) ends its event streams
// when hs shuts down. It returns the listener's URL scheme.
func (o *adminAuth) serveAdminOn(ctx context.Context, a *app, ln net.Listener, hs *http.Server, pg *page.Page) (string, error) {
	tc, err := o.tlsConfig(ctx)
	if err != nil {
		return "", exitCode(2, "admin TLS:", err)
	}
	// The public listeners' cap (see capConns), on the connections
	// before TLS: so many clients idle on this port cannot take the
	// descriptors the public ones need.
	ln, hs.ConnState = capConns(ln, cmp.Or(o.maxConns, defaultAdminMaxConns()))
	scheme := "http"
	if tc != nil {
		ln, scheme = tls.NewListener(ln, tc), "https"
	}
	if pg != nil {
		hs.RegisterOnShutdown(pg.Close) // its event streams would hold the drain
	}
	a.serveHTTP(hs, ln)
	return scheme, nil
}
