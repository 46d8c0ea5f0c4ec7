// Package adminclient is the client side of the admin API (package admin)
// that `sluice admin` runs: an operation's arguments become one HTTP call
// (Operation), and a Client makes the call with a bearer token or a client
// certificate and copies the answer out, or says why it failed and which
// URL it tried (Client.Do).
//
// It reads the token and the CA bundle as serve's admin listener does
// (internal/daemon), and speaks the API's own paths and types (package
// admin), so it is wiring in internal/archtest's layers: cmd/sluice
// imports it, and it imports nothing from cmd.
//
// Shipped: built into the sluice binary through cmd/sluice; it imports no
// test-only package (internal/archtest holds that).
package adminclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/safefile"
)

// URLEnv is the environment variable of sluice admin's -url default.
const URLEnv = "SLUICE_ADMIN_URL"

// DefaultURL is sluice admin's -url default: the proxy's default admin
// listener, and serve's as the docs start it (-admin-addr 9901).
const DefaultURL = "http://127.0.0.1:9901"

// A Client is the connection settings of a client of the admin API. The
// zero value makes no call: its zero Timeout fails every call at once.
type Client struct {
	// URL is the API's base URL: http://host:port, https://host:port, or
	// host:port or a port alone, which mean http:// (a port alone, or
	// :port, on loopback as daemon.AdminAddr listens).
	URL string
	// URLSource says where URL came from ("-url", URLEnv, "the
	// default"), for the errors of calls that did not reach the API.
	URLSource string
	// TokenFile holds the bearer token; "": daemon.AdminTokenEnv's value,
	// as daemon.ReadAdminToken reads it. No token sends no Authorization.
	TokenFile string
	// CA is a PEM bundle the API's certificate must chain to; "": the
	// system's roots.
	CA string
	// Cert and Key are a client certificate and its key (PEM) for mTLS;
	// both or neither.
	Cert, Key string
	// Timeout bounds each call, a ledger export ten times it; zero or
	// less is a UsageError naming -timeout, before any call.
	Timeout time.Duration
}

// A Call is one HTTP call of an operation: its method, its path (with the
// query) under the base URL, and a body sent as JSON (nil for none).
type Call struct {
	Method, Path string
	Body         any
}

// UsageError is an error of a setting or an argument that cannot work (a
// malformed URL, a key file that cannot be read, -cert without -key):
// sluice admin exits 2 on it, 1 on any other error of a call.
type UsageError struct{ Err error }

// Error returns the error's message.
func (e UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the error it wraps.
func (e UsageError) Unwrap() error { return e.Err }

// Do makes call and copies a successful answer to w: "ok\n" for one with
// no content (204), else its body (JSON, or CSV for a CSV ledger export).
// An answer that is not 2xx is an error holding its status and the API's
// message; one that did not reach the API (no answer, or a 404 that is not
// the API's own) names the URL tried, where it came from and where the
// API listens.
func (c *Client) Do(ctx context.Context, call Call, w io.Writer) error {
	if c.Timeout <= 0 {
		return UsageError{fmt.Errorf("-timeout %v: want a positive duration", c.Timeout)}
	}
	timeout := c.Timeout
	if strings.HasPrefix(call.Path, "/v1/ledger") {
		timeout *= 10
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc, err := c.httpClient(ctx)
	if err != nil {
		return err
	}
	req, err := c.request(ctx, call)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w (tried %s, %s%s)", err, req.URL.Redacted(), c.URLSource, hint)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
			if resp.StatusCode == http.StatusNotFound {
				// Not the admin API's own answer: another listener.
				e.Error += fmt.Sprintf(" (tried %s, %s: no admin API there%s)", req.URL.Redacted(), c.URLSource, hint)
			}
		}
		return fmt.Errorf("%s %s: %s: %s", call.Method, req.URL.Path, resp.Status, e.Error)
	}
	if resp.StatusCode == http.StatusNoContent {
		_, err = io.WriteString(w, "ok\n")
		return err
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// hint says where the admin API is, for an error of a call that did not
// reach it.
const hint = "; the admin API is at sluice serve's -admin-addr, or sluice proxy's -admin-addr (default 127.0.0.1:9901) when it has an admin token or client CA; give -url or " + URLEnv

// Token returns the bearer token as daemon.ReadAdminToken reads it (as
// serve does), "" for none; a file that cannot be read is a UsageError.
func (c *Client) Token(ctx context.Context) (string, error) {
	t, err := daemon.ReadAdminToken(ctx, c.TokenFile)
	if err != nil {
		return "", UsageError{err}
	}
	return t, nil
}

// httpClient returns the client of c's TLS settings.
func (c *Client) httpClient(ctx context.Context) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CA != "" {
		pool, err := daemon.LoadCertPool(ctx, c.CA)
		if err != nil {
			return nil, UsageError{err}
		}
		tc.RootCAs = pool
	}
	if (c.Cert == "") != (c.Key == "") {
		return nil, UsageError{errors.New("-cert and -key go together")}
	}
	if c.Cert != "" {
		pair, err := safefile.ReadKeyPair(ctx, c.Cert, c.Key)
		if err != nil {
			return nil, UsageError{err}
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr}, nil
}

// baseURL is URL as a URL: a port alone or host:port means http://. A
// value with no host, an empty port or one outside 1 to 65535, a host
// without a scheme or a port, a query or a fragment is a UsageError naming
// where the value came from (-url, or URLEnv when URLSource says so), the
// value (its secrets masked), and why. A user name or password is refused:
// the API reads only the token, and Go's client would send them as Basic
// authorization beside it.
func (c *Client) baseURL() (*url.URL, error) {
	name := "-url"
	if c.URLSource == URLEnv {
		name = URLEnv
	}
	bad := func(why string) error {
		return UsageError{fmt.Errorf("%s %q: %s; want http://host:port, https://host:port, host:port or a port", name, redact.URL(c.URL), why)}
	}
	raw := c.URL
	if !strings.Contains(raw, "://") {
		if strings.ContainsAny(raw, "/?#") {
			return nil, bad("no scheme (http:// or https://), and not a host:port or a port")
		}
		if raw != "" && !strings.Contains(raw, ":") && strings.Trim(raw, "0123456789") != "" {
			return nil, bad("a host needs a port (host:port), or a scheme (http://host)")
		}
		if !strings.Contains(raw, ":") {
			raw = ":" + raw
		}
		raw = "http://" + daemon.AdminAddr(raw)
	}
	base, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, bad("not a URL")
	case base.Scheme != "http" && base.Scheme != "https":
		return nil, bad("the scheme is not http or https")
	case base.Hostname() == "":
		return nil, bad("no host")
	case base.RawQuery != "" || base.ForceQuery || base.Fragment != "":
		return nil, bad("a query or a fragment, which the API's paths cannot follow")
	case base.User != nil:
		return nil, bad("a user name or password, which the API does not read (it takes the token: -token-file or " + daemon.AdminTokenEnv + ")")
	}
	if base.Port() != "" || strings.HasSuffix(base.Host, ":") {
		if p, err := strconv.Atoi(base.Port()); err != nil || p < 1 || p > 65535 {
			return nil, bad("the port is not 1 to 65535")
		}
	}
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawPath = strings.TrimRight(base.RawPath, "/")
	return base, nil
}

// request builds call's request with its body and token.
func (c *Client) request(ctx context.Context, call Call) (*http.Request, error) {
	var body io.Reader
	if call.Body != nil {
		b, err := json.Marshal(call.Body)
		if err != nil {
			return nil, UsageError{err}
		}
		body = bytes.NewReader(b)
	}
	base, err := c.baseURL()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, call.Method, base.String()+call.Path, body)
	if err != nil {
		return nil, UsageError{err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	tok, err := c.Token(ctx)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}
