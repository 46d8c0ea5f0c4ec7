package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/xdstest"
	"github.com/sluicehq/sluice/xdsconfig"
)

// xdsNode is the node id the tests' serve presents.
const xdsNode = "sluice-test"

// perHour is a RateLimitConfig of domain d giving each user n requests an
// hour.
func perHour(n uint32) *rlconf.RateLimitConfig {
	return &rlconf.RateLimitConfig{Name: "d-rules", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "user", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_HOUR, RequestsPerUnit: n}},
	}}
}

// setXDSEnv points serve at srv with envoyproxy/ratelimit's variables,
// over TLS with a client certificate when pki is not nil, with short
// reconnect waits (a test's, not a production default).
func setXDSEnv(t *testing.T, srv *xdstest.Server, pki *xdstest.PKI) {
	t.Setenv("CONFIG_TYPE", "GRPC_XDS_SOTW")
	t.Setenv("CONFIG_GRPC_XDS_SERVER_URL", srv.Addr)
	t.Setenv("CONFIG_GRPC_XDS_NODE_ID", xdsNode)
	t.Setenv("CONFIG_GRPC_XDS_NODE_METADATA", "cluster=edge,zone=a")
	t.Setenv("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "x-tenant:blue")
	t.Setenv("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "100ms")
	t.Setenv("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "100ms")
	t.Setenv("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "1s")
	if pki != nil {
		t.Setenv("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true")
		t.Setenv("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", pki.CAFile)
		t.Setenv("CONFIG_GRPC_XDS_SERVER_TLS_SAN", xdstest.ServerName)
		t.Setenv("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", pki.ClientCert)
		t.Setenv("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", pki.ClientKey)
	}
}

// userCodes sends n requests for user u and returns the status codes.
func userCodes(t *testing.T, url, u string, n int) []int {
	t.Helper()
	var codes []int
	for range n {
		codes = append(codes, post(t, url, `{"domain":"d","descriptors":[{"entries":[{"key":"user","value":"`+u+`"}]}]}`))
	}
	return codes
}

// allowed is n 200s then a 429.
func allowed(n int) []int { return append(slices.Repeat([]int{200}, n), 429) }

// The config comes from a real xDS server over mutual TLS: the first push
// answers, an update answers with its new limits, a bad config is NACKed
// with its error while the running one keeps answering, and when the
// server goes away serve keeps serving, re-subscribes to the restarted
// server with the version it runs, and takes its next push.
func TestServeTakesItsConfigFromAnXDSServerOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pki := xdstest.NewPKI(t)
	srv := xdstest.Start(t, "127.0.0.1:0", pki.ServerCreds())
	setXDSEnv(t, srv, pki)
	srv.Push(t, xdsNode, "v1", perHour(1))
	url := launch(t).url // serves once the first config is in

	first := srv.Requests()[0]
	if first.GetNode().GetId() != xdsNode || first.GetNode().GetMetadata().GetFields()["zone"].GetStringValue() != "a" {
		t.Errorf("first request's node %v: want %s with zone=a", first.GetNode(), xdsNode)
	}
	if got := first.Metadata.Get("x-tenant"); !slices.Equal(got, []string{"blue"}) {
		t.Errorf("stream header x-tenant = %v, want [blue]", got)
	}
	_, i := srv.WaitRequest(ctx, t, 0, func(r xdstest.Request) bool { return xdstest.IsACK(r, "v1") })
	if got := userCodes(t, url, "a", 2); !slices.Equal(got, allowed(1)) {
		t.Fatalf("v1, 1 an hour: %v", got)
	}

	// An update: applied before it is ACKed, so it answers once ACKed.
	srv.Push(t, xdsNode, "v2", perHour(3))
	_, i = srv.WaitRequest(ctx, t, i+1, func(r xdstest.Request) bool { return xdstest.IsACK(r, "v2") })
	if got := userCodes(t, url, "b", 4); !slices.Equal(got, allowed(3)) {
		t.Fatalf("v2, 3 an hour: %v", got)
	}

	// A bad config: two descriptors for one key.
	bad := perHour(5)
	bad.Descriptors = append(bad.Descriptors, bad.Descriptors[0])
	srv.Push(t, xdsNode, "v3", bad)
	nack, _ := srv.WaitRequest(ctx, t, i+1, xdstest.IsNACK)
	if msg := nack.GetErrorDetail().GetMessage(); nack.GetVersionInfo() != "v2" || !strings.Contains(msg, "xds:d-rules") || !strings.Contains(msg, "duplicate descriptor") {
		t.Errorf("NACK version %q, error %q: want v2 (the running config) and the config error naming xds:d-rules", nack.GetVersionInfo(), msg)
	}
	if got := userCodes(t, url, "c", 4); !slices.Equal(got, allowed(3)) {
		t.Fatalf("after the NACKed v3, v2's 3 an hour should answer: %v", got)
	}

	// The server goes away: serve keeps answering with v2.
	srv.Stop()
	if got := userCodes(t, url, "d", 4); !slices.Equal(got, allowed(3)) {
		t.Fatalf("with the xDS server down, v2's 3 an hour should answer: %v", got)
	}
	srv2 := xdstest.Start(t, srv.Addr, pki.ServerCreds())
	re, _ := srv2.WaitRequest(ctx, t, 0, func(xdstest.Request) bool { return true })
	if re.GetVersionInfo() != "v2" || re.GetNode().GetId() != xdsNode {
		t.Errorf("re-subscription %v: want node %s at version v2", re.DiscoveryRequest, xdsNode)
	}
	srv2.Push(t, xdsNode, "v4", perHour(5))
	srv2.WaitRequest(ctx, t, 0, func(r xdstest.Request) bool { return xdstest.IsACK(r, "v4") })
	if got := userCodes(t, url, "e", 6); !slices.Equal(got, allowed(5)) {
		t.Fatalf("v4 from the restarted server, 5 an hour: %v", got)
	}
}

// Without a config from the server serve does not listen (Envoy's
// failure mode then decides, as when envoyproxy/ratelimit has no config),
// and SIGTERM while it waits is a clean stop.
func TestServeWaitsForTheFirstXDSConfig(t *testing.T) {
	srv := xdstest.Start(t, "127.0.0.1:0", nil)
	setXDSEnv(t, srv, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runServe(ctx, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb)
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	srv.WaitRequest(wctx, t, 0, func(xdstest.Request) bool { return true }) // subscribed
	cancel()
	select {
	case code := <-done:
		if code != 0 || strings.Contains(out.String(), "HTTP") {
			t.Errorf("exit %d, stdout %q: want 0 and no listener", code, out.String())
		}
	case <-wctx.Done():
		t.Fatal("serve did not stop while waiting for its first config")
	}
}

// FORCE_START_WITHOUT_INITIAL_CONFIG serves at once, with no domains:
// every descriptor is unmatched, so allowed.
func TestServeForceStartServesNoDomainsUntilTheFirstXDSConfig(t *testing.T) {
	srv := xdstest.Start(t, "127.0.0.1:0", nil)
	setXDSEnv(t, srv, nil)
	t.Setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", "true")
	url := launch(t).url
	if got := userCodes(t, url, "a", 3); !slices.Equal(got, []int{200, 200, 200}) {
		t.Fatalf("no domains: %v, want all allowed", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv.Push(t, xdsNode, "v1", perHour(1))
	srv.WaitRequest(ctx, t, 0, func(r xdstest.Request) bool { return xdstest.IsACK(r, "v1") })
	if got := userCodes(t, url, "a", 2); !slices.Equal(got, allowed(1)) {
		t.Fatalf("after v1: %v", got)
	}
}

// Settings that cannot be acted on as given are refused at start (exit 2,
// naming them) rather than ignored.
func TestServeRefusesXDSSettingsItCannotActOn(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown config type", map[string]string{"CONFIG_TYPE": "ETCD"}, nil, "CONFIG_TYPE"},
		{"metadata item without =", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_METADATA": "zone:a"}, nil, "CONFIG_GRPC_XDS_NODE_METADATA"},
		{"header without :", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x-a"}, nil, "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"},
		{"bad backoff", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR": "-1"}, nil, "XDS_CLIENT_BACKOFF_RANDOM_FACTOR"},
		{"cert without key", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/nonexistent"}, nil, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY"},
		{"key file missing", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/nonexistent/c.pem", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/nonexistent/k.pem"}, nil, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY"},
		{"-config too", map[string]string{"CONFIG_TYPE": "grpc_xds_sotw"}, []string{"-config", "x.yaml"}, "-config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out, errb testlog.Buffer
			code := runServe(ctx, append([]string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, tt.args...), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q: want 2 naming %s", code, errb.String(), tt.want)
			}
		})
	}
}

// Under CONFIG_TYPE=FILE the xDS variables are not acted on, so they are
// named in the start-up line; under xDS, FORCE_START_WITHOUT_INITIAL_CONFIG
// is acted on, and the TLS files are not without
// CONFIG_GRPC_XDS_SERVER_USE_TLS.
func TestXDSVariablesNotActedOnAreNamed(t *testing.T) {
	t.Setenv("CONFIG_GRPC_XDS_NODE_ID", "n")
	t.Setenv("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "c.pem")
	t.Setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", "true")
	if got := xdsNotActedOn(nil, []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}); !slices.Contains(got, "CONFIG_GRPC_XDS_NODE_ID") ||
		!slices.Contains(got, "FORCE_START_WITHOUT_INITIAL_CONFIG") {
		t.Errorf("file config: %v, want the xDS node id and FORCE_START named", got)
	}
	got := xdsNotActedOn(&xdsSettings{}, []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"})
	if !slices.Equal(got, []string{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT"}) {
		t.Errorf("xDS without TLS: %v, want only the TLS cert named", got)
	}
}

// With TLS, a server whose certificate does not hold the name to verify
// (CONFIG_GRPC_XDS_SERVER_TLS_SAN) is not talked to: no request reaches
// it, and serve says why.
func TestServeXDSDoesNotTrustAServerWithoutTheSAN(t *testing.T) {
	pki := xdstest.NewPKI(t)
	srv := xdstest.Start(t, "127.0.0.1:0", pki.ServerCreds())
	setXDSEnv(t, srv, pki)
	t.Setenv("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "other.sluice.test")
	srv.Push(t, xdsNode, "v1", perHour(1))
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runServe(ctx, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb)
	}()
	eventually(t, "a certificate error logged", func() bool { return strings.Contains(errb.String(), "other.sluice.test") })
	cancel()
	if code := <-done; code != 0 || len(srv.Requests()) != 0 || strings.Contains(out.String(), "HTTP") {
		t.Errorf("exit %d, %d requests at the server, stdout %q: want 0, none, no listener", code, len(srv.Requests()), out.String())
	}
}

// envoyproxy/ratelimit's defaults apply to the variables left unset.
func TestXDSSettingsDefaults(t *testing.T) {
	t.Setenv("CONFIG_TYPE", "GRPC_XDS_SOTW")
	var e envflag.Errs
	x := xdsFromEnv(&e)
	c := x.client
	if len(e) != 0 || c.Target != "localhost:18000" || c.NodeID != "default" || c.ConnectRetry != 3*time.Second ||
		c.Backoff != (xdsconfig.Backoff{Initial: 10 * time.Second, Max: time.Minute, Factor: 0.5, Jitter: true}) ||
		c.MaxMsgSize != 0 || x.useTLS || x.forceStart || c.NodeMetadata != nil || c.Headers != nil {
		t.Errorf("defaults: %+v, %+v (errors %v)", c, x, e)
	}
	t.Setenv("CONFIG_TYPE", "FILE")
	if x := xdsFromEnv(&e); x != nil || len(e) != 0 {
		t.Errorf("CONFIG_TYPE=FILE: %+v, %v; want no xDS", x, e)
	}
}
