package gateway_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/goldentest"
	"github.com/sluicehq/sluice/request"
	"github.com/sluicehq/sluice/rlheader"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/golden with the current output")

// TestProxyFileGolden walks testdata/golden/valid and testdata/golden/invalid.
// Each NAME.yaml is parsed by ParseFile; its NAME.golden holds the parsed
// File dumped by dumpFile (valid) or the exact error, which names the file,
// line and column (invalid). Run
// `go test ./gateway -run ProxyFileGolden -update` to rewrite them, then
// read the diff.
func TestProxyFileGolden(t *testing.T) {
	goldentest.Run(t, filepath.Join("testdata", "golden"), *update, func(name string, data []byte) (func(io.Writer), error) {
		f, err := gateway.ParseFile(name, data)
		if err != nil {
			return nil, err
		}
		return func(w io.Writer) { dumpFile(w, f) }, nil
	})
}

// probe is the request every key of a valid golden file is computed for,
// since a key is a function: a client at 192.0.2.7 (not a trusted proxy
// in any golden file) asking GET http://Example.COM:8080/probe with an
// X-API-Key header and an X-Forwarded-For header it forged.
func probe() *http.Request {
	r := httptest.NewRequest("GET", "http://Example.COM:8080/probe", nil)
	r.RemoteAddr = "192.0.2.7:4321"
	r.Header.Set("X-API-Key", "k-123")
	r.Header.Set("X-Forwarded-For", "198.51.100.9")
	return r
}

// probeKey renders what kf makes of the probe request.
func probeKey(kf httplimit.KeyFunc) string {
	if kf == nil {
		return "none (one group)"
	}
	k, ok := kf(probe())
	if !ok {
		return "missing"
	}
	return fmt.Sprintf("%q", k)
}

// orDefault renders v: "default" when it is zero (the Gateway's default),
// the word negative when it is below zero and negative is not empty.
func orDefault[T int64 | time.Duration](v T, negative string) string {
	switch {
	case v == 0:
		return "default"
	case v < 0 && negative != "":
		return negative
	}
	return fmt.Sprint(v)
}

func missing(m httplimit.MissingKey) string {
	if m == httplimit.SkipMissing {
		return "skip"
	}
	return "reject"
}

// dumpFile writes f as the gateway will run it, one fact a line, in the
// order of the file's blocks; fields are shown as parsed (0 is the
// Gateway's default), keys as computed for the probe request.
func dumpFile(w io.Writer, f *gateway.File) {
	c := f.Config
	fmt.Fprintf(w, "file %s\n", f.Name)
	fmt.Fprintf(w, "listen %q store %q access_log %q log_key_secret_file %q\n", f.Listen, f.Store, f.AccessLog, f.LogKeySecretFile)
	fmt.Fprintf(w, "status %d conn_status %d store_error_status %d dry_run %t\n", c.StatusCode, c.ConcurrencyStatusCode, c.StoreErrorStatus, c.DryRun)
	fmt.Fprintf(w, "headers: draft %t legacy %t; hash_keys %t log_keys %t\n", c.Headers.Or(rlheader.Draft11).SendsDraft11(), c.Headers.SendsLegacy(), c.HashKeys, c.LogKeys)
	fmt.Fprintf(w, "max_in_flight %d client_max_body_size %s upstream_timeout %v\n", c.MaxInFlight, orDefault(c.ClientMaxBodySize, "no cap"), c.UpstreamTimeout)
	t := c.Timeouts
	fmt.Fprintf(w, "timeouts: client_header %s client_body %s client_body_min_rate %s send %s keepalive %s\n",
		orDefault(t.ClientHeader, ""), orDefault(t.ClientBody, ""), orDefault(t.ClientBodyMinRate, "off"), orDefault(t.Send, ""), orDefault(t.Keepalive, ""))
	if res := c.TrustedProxies; res != nil {
		fmt.Fprintf(w, "trusted_proxies %v forwarded_header %v\n", res.TrustedProxies, res.Header)
	}
	for _, u := range c.Upstreams {
		fmt.Fprintf(w, "upstream %s %s max_in_flight %d preserve_host %t", u.Name, u.URL, u.MaxInFlight, u.PreserveHost)
		if u.PathSemantics != request.PathStrict {
			fmt.Fprintf(w, " path_semantics %v", u.PathSemantics)
		}
		fmt.Fprintln(w)
	}
	for _, rt := range c.Routes {
		fmt.Fprintf(w, "route %s match %q", rt.Name, rt.Patterns)
		if len(rt.Methods) > 0 {
			fmt.Fprintf(w, " methods %v", rt.Methods)
		}
		if rt.Upstream == "" {
			fmt.Fprintln(w, " upstream (the first)")
		} else {
			fmt.Fprintf(w, " upstream %s\n", rt.Upstream)
		}
		for _, p := range rt.Policies {
			if q := p.Queue; q != nil {
				fmt.Fprintf(w, "  limit %s: queue %d per %v burst %d delay %d nodelay %t", p.Name, q.Rate, q.Period, q.Burst, q.Delay, q.NoDelay)
			} else {
				fmt.Fprintf(w, "  limit %s: %v", p.Name, p.Limit)
			}
			fmt.Fprintf(w, "; key %s missing_key %s dry_run %t\n", probeKey(p.Key), missing(p.OnMissingKey), p.Shadow)
		}
		for _, cp := range rt.Concurrency {
			fmt.Fprintf(w, "  conns %s: max %d; key %s missing_key %s dry_run %t\n", cp.Name, cp.Max, probeKey(cp.Key), missing(cp.OnMissingKey), cp.Shadow)
		}
	}
}
