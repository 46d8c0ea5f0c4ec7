package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/safefile"
)

// adminURLEnv is the environment variable of sluice admin's -url default.
const adminURLEnv = "SLUICE_ADMIN_URL"

// defaultAdminURL is sluice admin's -url default: the proxy's default
// admin listener, and serve's as the docs start it (-admin-addr 9901).
const defaultAdminURL = "http://127.0.0.1:9901"

// adminUsage is admin's -h.
var adminUsage = usage{
	synopsis: "sluice admin [flags] OPERATION [ARGUMENTS]",
	about: `Admin calls the admin API of a running sluice serve or proxy (its
-admin-addr) and prints the answer: JSON, CSV for a CSV ledger export, or "ok" for a change.
The default -url is the admin listener both serve and proxy are shown
with in the docs (serve -admin-addr 9901; the proxy's default); the
error of a call says which URL was tried. The token is read from
-token-file, else ` + daemon.AdminTokenEnv + `; with -cert and -key the call
authenticates by client certificate (mTLS). Exit status 1 when the
API refuses or fails the call (its status and message on stderr), 2 for a
usage error. Operations:

  peek -domain D -descriptor K=V[,K2=V2]
                                  the state of each key the running config
                                  counts the descriptor under, spending
                                  nothing (on sluice proxy: -domain LIMIT
                                  -descriptor key=VALUE, VALUE what the
                                  limit's key is, such as a client IP)
  reset -domain D -descriptor K=V[,K2=V2]
                                  give back all those keys spent
  peek KEY LIMIT                  low level: a store key's state under LIMIT
  reset KEY LIMIT                 low level: give back what KEY spent,
                                  counted under LIMIT (at most its capacity)
  login                           print a one-time link that opens the live
                                  page in a browser (single use, 5 minutes)
  set-plan PLAN LIMITS            create or replace a plan: {"NAME": LIMIT, ...}
  assign TENANT PLAN              put a tenant on a plan ("" takes it off)
  override TENANT NAME LIMIT [EXPIRES]
                                  a tenant's own limit of NAME (domain.key...),
                                  until EXPIRES (RFC 3339, or a duration from now)
  clear-override TENANT NAME      delete a tenant's override
  usage KEY                       a key's usage by period, from the ledger
  ledger FROM TO [csv|json]       every period starting in [FROM, TO) (RFC 3339)

LIMIT is JSON: {"rate": 10000, "calendar": {"unit": "month", "time_zone":
"Europe/Berlin", "anchor_day": 15}} or {"rate": 100, "period": "1m"}
(algorithm: fixed_window unless "algorithm" says otherwise).`,
	examples: []string{
		"sluice admin peek -domain web -descriptor user=alice",
		"sluice admin reset -domain api -descriptor tenant=acme,path=/upload",
		`sluice admin set-plan pro '{"api.tenant": {"rate": 10000, "calendar": {"unit": "month"}}}'`,
		"sluice admin assign acme pro",
		`sluice admin override acme api.tenant '{"rate": 20000, "calendar": {"unit": "month"}}' 72h`,
		"sluice admin -url https://sluice:9901 -ca ca.pem ledger 2026-01-01T00:00:00Z 2026-02-01T00:00:00Z csv",
	},
}

// adminClient is sluice admin's connection settings.
type adminClient struct {
	base      string
	urlSource string // where base came from, for errors: -url, the variable, the default
	tokenFile string
	ca        string
	cert, key string
	timeout   time.Duration
}

// adminCall is one HTTP call an operation makes.
type adminCall struct {
	method, path string
	body         any
}

// runAdmin runs `sluice admin`.
func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice admin", flag.ContinueOnError)
	var c adminClient
	fs.StringVar(&c.base, "url", envflag.String(adminURLEnv, defaultAdminURL), "the admin API's base URL (serve's or proxy's -admin-addr; a port or host:port means http://)")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding the bearer token (else "+daemon.AdminTokenEnv+")")
	fs.StringVar(&c.ca, "ca", "", "CA bundle (PEM) that the API's certificate must chain to; default: the system's")
	fs.StringVar(&c.cert, "cert", "", "client certificate (PEM) for mTLS, with -key")
	fs.StringVar(&c.key, "key", "", "client key (PEM) for mTLS")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up on a call after this long (a ledger export: 10 times this)")
	if code, done := parseCommandLine(fs, args, stdout, stderr, adminUsage, 6); done {
		return code
	}
	fail := daemon.ExitWith(stderr, "sluice admin:")
	if fs.NArg() == 0 {
		return fail(2, "give an operation. Run 'sluice admin -h' for the list.")
	}
	c.urlSource = "-url"
	switch {
	case !envflag.IsSet(fs, "url") && os.Getenv(adminURLEnv) != "":
		c.urlSource = adminURLEnv
	case !envflag.IsSet(fs, "url"):
		c.urlSource = "the default"
	}
	call, err := adminOperation(fs.Args(), time.Now())
	if err != nil {
		return fail(2, err)
	}
	if err := c.do(ctx, call, stdout); err != nil {
		var ue usageErr
		if errors.As(err, &ue) {
			return fail(2, err)
		}
		return fail(1, err)
	}
	return 0
}

// usageErr is a setting of sluice admin that cannot work (exit status 2).
type usageErr struct{ error }

// adminOperation maps an operation's arguments to its call.
func adminOperation(args []string, now time.Time) (adminCall, error) {
	op, a := args[0], args[1:]
	if (op == "peek" || op == "reset") && len(a) > 0 && strings.HasPrefix(a[0], "-") {
		return descriptorCall(op, a)
	}
	want := map[string][2]int{"peek": {2, 2}, "reset": {2, 2}, "set-plan": {2, 2}, "assign": {2, 2},
		"override": {3, 4}, "clear-override": {2, 2}, "usage": {1, 1}, "ledger": {2, 3}, "login": {0, 0}}
	n, ok := want[op]
	if !ok {
		return adminCall{}, fmt.Errorf("unknown operation %q. Run 'sluice admin -h' for the list", op)
	}
	if len(a) < n[0] || len(a) > n[1] {
		return adminCall{}, fmt.Errorf("%s takes %d to %d arguments, got %d. Run 'sluice admin -h' for the usage", op, n[0], n[1], len(a))
	}
	raw := func(s, what string) (json.RawMessage, error) {
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("%s: %s is not JSON", op, what)
		}
		return json.RawMessage(s), nil
	}
	esc := url.PathEscape
	switch op {
	case "peek", "reset":
		lim, err := raw(a[1], "LIMIT")
		return adminCall{"POST", "/v1/keys/" + op, map[string]any{"key": a[0], "limit": lim}}, err
	case "set-plan":
		lims, err := raw(a[1], "LIMITS")
		return adminCall{"PUT", "/v1/plans/" + esc(a[0]), map[string]any{"limits": lims}}, err
	case "assign":
		return adminCall{"PUT", "/v1/tenants/" + esc(a[0]) + "/plan", map[string]any{"plan": a[1]}}, nil
	case "override":
		return overrideCall(a, now)
	case "clear-override":
		return adminCall{"DELETE", "/v1/tenants/" + esc(a[0]) + "/overrides/" + esc(a[1]), nil}, nil
	case "usage":
		return adminCall{"GET", "/v1/usage?" + url.Values{"key": {a[0]}}.Encode(), nil}, nil
	case "login":
		return adminCall{"POST", admin.LoginLinksPath, struct{}{}}, nil
	}
	q := url.Values{"from": {a[0]}, "to": {a[1]}}
	if len(a) == 3 {
		q.Set("format", a[2])
	}
	return adminCall{"GET", "/v1/ledger?" + q.Encode(), nil}, nil
}

// descriptorCall is the call of peek or reset by descriptor: -domain D
// and -descriptor K=V[,K2=V2] (repeatable; the entries in order).
func descriptorCall(op string, args []string) (adminCall, error) {
	fs := flag.NewFlagSet("sluice admin "+op, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	domain := fs.String("domain", "", "the descriptor's domain (on sluice proxy: the limit's name)")
	var entries []admin.DescriptorEntry
	fs.Func("descriptor", "the descriptor's entries, K=V[,K2=V2] (repeatable)", func(s string) error {
		for kv := range strings.SplitSeq(s, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("%q: want KEY=VALUE[,KEY2=VALUE2]", kv)
			}
			entries = append(entries, admin.DescriptorEntry{Key: k, Value: v})
		}
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return adminCall{}, fmt.Errorf("%s: %w. Run 'sluice admin -h' for the usage", op, err)
	}
	switch {
	case fs.NArg() > 0:
		return adminCall{}, fmt.Errorf("%s: unexpected argument %q (by descriptor it takes -domain and -descriptor only)", op, fs.Arg(0))
	case *domain == "" || len(entries) == 0:
		return adminCall{}, fmt.Errorf("%s: give -domain D and -descriptor K=V[,K2=V2]", op)
	}
	return adminCall{"POST", "/v1/descriptors/" + op, map[string]any{"domain": *domain, "entries": entries}}, nil
}

// overrideCall is the override operation's call: EXPIRES is an RFC 3339
// time or a duration from now.
func overrideCall(a []string, now time.Time) (adminCall, error) {
	if !json.Valid([]byte(a[2])) {
		return adminCall{}, errors.New("override: LIMIT is not JSON")
	}
	body := map[string]any{"limit": json.RawMessage(a[2])}
	if len(a) == 4 {
		exp, err := time.Parse(time.RFC3339, a[3])
		if err != nil {
			d, derr := time.ParseDuration(a[3])
			if derr != nil || d <= 0 {
				return adminCall{}, fmt.Errorf("override: EXPIRES %q is neither an RFC 3339 time nor a positive duration", a[3])
			}
			exp = now.Add(d)
		}
		body["expires"] = exp.UTC().Format(time.RFC3339Nano)
	}
	return adminCall{"PUT", "/v1/tenants/" + url.PathEscape(a[0]) + "/overrides/" + url.PathEscape(a[1]), body}, nil
}

// httpClient returns the client of c's TLS settings.
func (c *adminClient) httpClient(ctx context.Context) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.ca != "" {
		pool, err := daemon.LoadCertPool(ctx, c.ca)
		if err != nil {
			return nil, usageErr{err}
		}
		tc.RootCAs = pool
	}
	if (c.cert == "") != (c.key == "") {
		return nil, usageErr{errors.New("-cert and -key go together")}
	}
	if c.cert != "" {
		pair, err := safefile.ReadKeyPair(ctx, c.cert, c.key)
		if err != nil {
			return nil, usageErr{err}
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr}, nil
}

// token returns the bearer token (daemon.ReadAdminToken), "" for none; a file
// that cannot be read is a usage error.
func (c *adminClient) token(ctx context.Context) (string, error) {
	t, err := daemon.ReadAdminToken(ctx, c.tokenFile)
	if err != nil {
		return "", usageErr{err}
	}
	return t, nil
}

// do makes call and copies a successful answer to stdout.
func (c *adminClient) do(ctx context.Context, call adminCall, stdout io.Writer) error {
	timeout := c.timeout
	if strings.HasPrefix(call.path, "/v1/ledger") {
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
		return fmt.Errorf("%w (tried %s, %s%s)", err, req.URL.Redacted(), c.urlSource, c.hint())
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
			if resp.StatusCode == http.StatusNotFound {
				// Not the admin API's own answer: another listener.
				e.Error += fmt.Sprintf(" (tried %s, %s: no admin API there%s)", req.URL.Redacted(), c.urlSource, c.hint())
			}
		}
		return fmt.Errorf("%s %s: %s: %s", call.method, req.URL.Path, resp.Status, e.Error)
	}
	if resp.StatusCode == http.StatusNoContent {
		_, err = io.WriteString(stdout, "ok\n")
		return err
	}
	_, err = io.Copy(stdout, resp.Body)
	return err
}

// hint says where the admin API is, for an error of a call that did not
// reach it.
func (c *adminClient) hint() string {
	return "; the admin API is at sluice serve's -admin-addr, or sluice proxy's -admin-addr (default 127.0.0.1:9901) when it has an admin token or client CA; give -url or " + adminURLEnv
}

// baseURL is -url as a URL: a port alone or host:port means http://.
func (c *adminClient) baseURL() (*url.URL, error) {
	raw := strings.TrimRight(c.base, "/")
	if !strings.Contains(raw, "://") {
		if !strings.Contains(raw, ":") {
			raw = ":" + raw
		}
		raw = "http://" + adminAddr(raw)
	}
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, usageErr{fmt.Errorf("-url %q: want http://host:port, https://host:port, host:port or a port", c.base)}
	}
	return base, nil
}

// request builds call's request with its body and token.
func (c *adminClient) request(ctx context.Context, call adminCall) (*http.Request, error) {
	var body io.Reader
	if call.body != nil {
		b, err := json.Marshal(call.body)
		if err != nil {
			return nil, usageErr{err}
		}
		body = bytes.NewReader(b)
	}
	base, err := c.baseURL()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, call.method, base.String()+call.path, body)
	if err != nil {
		return nil, usageErr{err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	tok, err := c.token(ctx)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}
