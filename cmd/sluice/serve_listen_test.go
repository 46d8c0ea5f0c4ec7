package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/testpki"
)

// launchListening starts `sluice serve -config` with telemetryConfig (k=v:
// 2 an hour) and args (see launch).
func launchListening(t *testing.T, args ...string) *server {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, cfg, telemetryConfig)
	return launch(t, append([]string{"-config", cfg}, args...)...)
}

// shouldRateLimit makes one ShouldRateLimit call for k=v at target with
// creds and returns its overall code, or the call's error.
func shouldRateLimit(t *testing.T, target string, creds credentials.TransportCredentials) (pb.RateLimitResponse_Code, error) {
	t.Helper()
	cc := dial(t, target, creds)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := pb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{
		{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}},
	}})
	return resp.GetOverallCode(), err
}

// clientTLS returns client credentials trusting ca for sluice.test, with
// the client certificate cert when it is not nil; seen receives the
// server's leaf certificate of each handshake.
func clientTLS(ca *testpki.CA, cert *tls.Certificate, seen func(*x509.Certificate)) credentials.TransportCredentials {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool, ServerName: "sluice.test"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	if seen != nil {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { seen(cs.PeerCertificates[0]); return nil }
	}
	return credentials.NewTLS(cfg)
}

// With envoyproxy/ratelimit's variables (GRPC_SERVER_USE_TLS, its pair and
// GRPC_CLIENT_TLS_CACERT), serve's gRPC listener is mTLS: a client without
// a certificate, or with one from another CA, is refused, and one with a
// certificate of the client CA is served. Before, GRPC_SERVER_USE_TLS=true
// was refused at start-up (exit 2).
func TestServeGRPCmTLSServesOnlyClientsWithACertificate(t *testing.T) {
	serverCA, clientCA, otherCA := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "client CA"), testpki.NewCA(t, "other CA")
	o := tlsFiles(t, t.TempDir(), serverCA.Issue(t, "sluice", false, "sluice.test"), clientCA)
	t.Setenv("GRPC_SERVER_USE_TLS", "true")
	t.Setenv("GRPC_SERVER_TLS_CERT", o.Cert)
	t.Setenv("GRPC_SERVER_TLS_KEY", o.Key)
	t.Setenv("GRPC_CLIENT_TLS_CACERT", o.ClientCA)
	target := launchListening(t).grpc

	if _, err := shouldRateLimit(t, target, clientTLS(serverCA, nil, nil)); err == nil {
		t.Error("a client without a certificate was served")
	}
	other := otherCA.Issue(t, "intruder", true, "intruder.test").Pair
	if _, err := shouldRateLimit(t, target, clientTLS(serverCA, &other, nil)); err == nil {
		t.Error("a client with another CA's certificate was served")
	}
	if _, err := shouldRateLimit(t, target, insecure.NewCredentials()); err == nil {
		t.Error("a plaintext client was served")
	}
	good := clientCA.Issue(t, "envoy", true, "envoy.test").Pair
	if code, err := shouldRateLimit(t, target, clientTLS(serverCA, &good, nil)); err != nil || code != pb.RateLimitResponse_OK {
		t.Errorf("a client with the client CA's certificate: %v %v, want OK", code, err)
	}
}

// The server certificate replaced on disk (renamed over, as a Secret's
// update does) is served to new connections without a restart.
func TestServeGRPCTLSPicksUpAReplacedCertificate(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	ca := testpki.NewCA(t, "server CA")
	dir := t.TempDir()
	o := tlsFiles(t, dir, ca.Issue(t, "first", false, "sluice.test"), nil)
	target := launchListening(t, "-grpc-tls", "-grpc-tls-cert", o.Cert, "-grpc-tls-key", o.Key).grpc

	var mu sync.Mutex
	var cn string
	seen := func(c *x509.Certificate) { mu.Lock(); cn = c.Subject.CommonName; mu.Unlock() }
	served := func() string {
		t.Helper()
		if code, err := shouldRateLimit(t, target, clientTLS(ca, nil, seen)); err != nil || code != pb.RateLimitResponse_OK && code != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("call over TLS: %v %v", code, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return cn
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q, want first", got)
	}
	second := ca.Issue(t, "second", false, "sluice.test")
	writeAtomic(t, o.Key, string(second.KeyPEM)) // key first: a pair that does not match keeps the running one
	writeAtomic(t, o.Cert, string(second.CertPEM))
	// The files are looked at on a handshake at most once a second.
	eventually(t, "the replaced certificate is served", func() bool { return served() == "second" })
}

// With GRPC_UDS, serve answers ShouldRateLimit on the Unix socket, and
// SIGTERM stops the process (exit 0) within its grace period, removing
// the socket. Before, GRPC_UDS was refused at start-up (exit 2).
func TestServeGRPCUDSServesOnTheSocketAndRemovesItOnStop(t *testing.T) {
	dir := shortTempDir(t)
	sock, cfg := filepath.Join(dir, "rls.sock"), filepath.Join(dir, "rl.yaml")
	writeFile(t, cfg, telemetryConfig)
	t.Setenv("GRPC_UDS", sock)
	p := startProcess(t, "true", "serve", "-config", cfg, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
	if p.grpc != "unix:"+sock {
		t.Fatalf("banner's gRPC target %q, want unix:%s", p.grpc, sock)
	}
	var codes []pb.RateLimitResponse_Code
	for range 3 {
		code, err := shouldRateLimit(t, p.grpc, insecure.NewCredentials())
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
	}
	if want := []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT}; !slices.Equal(codes, want) {
		t.Errorf("codes over the socket %v, want %v (2 an hour)", codes, want)
	}
	p.stop(t, daemon.DrainGrace)
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket after stop: %v, want it removed", err)
	}
	if !regexp.MustCompile(`not acted on.*flags=\S*-grpc-addr`).MatchString(p.stderr.String()) {
		t.Errorf("-grpc-addr with GRPC_UDS is not named as not acted on: %s", p.stderr.String())
	}
}

// With DEBUG_HOST/DEBUG_PORT, serve has a debug listener that serves the
// running config at /rlconfig (a reloaded one included) and pprof; neither
// is on the main HTTP listener. Before, DEBUG_PORT was named as not acted
// on.
func TestServeDebugListenerServesRLConfigAndPprof(t *testing.T) {
	t.Setenv("DEBUG_HOST", "127.0.0.1")
	t.Setenv("DEBUG_PORT", "0")
	cfg := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, cfg, telemetryConfig)
	s := launch(t, "-config", cfg)
	m := regexp.MustCompile(`^(http://\S+)`).FindStringSubmatch(s.debug)
	if m == nil {
		t.Fatalf("banner's debug line %q: no URL", s.debug)
	}
	durl := m[1]
	if code, body := get(t, durl+"/rlconfig"); code != 200 || !strings.Contains(body, "d.k: unit=HOUR requests_per_unit=2,") {
		t.Errorf("GET /rlconfig: %d %q, want the loaded rule", code, body)
	}
	writeFile(t, cfg, strings.Replace(telemetryConfig, "requests_per_unit: 2", "requests_per_unit: 9", 1))
	eventually(t, "/rlconfig shows the reloaded config", func() bool {
		_, body := get(t, durl+"/rlconfig")
		return strings.Contains(body, "d.k: unit=HOUR requests_per_unit=9,")
	})
	if code, body := get(t, durl+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/: %d", code)
	}
	if code, _ := get(t, durl+"/debug/pprof/heap?debug=1"); code != 200 {
		t.Errorf("GET /debug/pprof/heap: %d", code)
	}
	for _, p := range []string{"/rlconfig", "/debug/pprof/", "/debug/pprof/heap"} {
		if code, _ := get(t, s.url+p); code != 404 {
			t.Errorf("main listener GET %s: %d, want 404", p, code)
		}
	}
}

// Without DEBUG_HOST, DEBUG_PORT or -debug-addr there is no debug
// listener (envoyproxy/ratelimit's is on 0.0.0.0:6070 by default), and the
// banner says so and how to ask for it.
func TestServeHasNoDebugListenerUnlessAsked(t *testing.T) {
	t.Setenv("DEBUG_HOST", "")
	t.Setenv("DEBUG_PORT", "")
	debug := launchListening(t).debug
	if !strings.HasPrefix(debug, "off") || !strings.Contains(debug, "DEBUG_PORT") {
		t.Errorf("banner's debug line %q, want off and how to turn it on", debug)
	}
}

// LOG_FORMAT=json makes every log line of serve a JSON object with
// envoyproxy/ratelimit's keys (@timestamp, @message, level); an unknown
// format is exit status 2. Before, LOG_FORMAT was named as not acted on
// and the lines were text.
func TestServeLogFormatJSON(t *testing.T) {
	t.Setenv("LOG_FORMAT", "json")
	t.Setenv("MEMCACHE_HOST_PORT", "memcache:11211") // logged at start-up as not acted on
	s := launchListening(t)
	s.stop(t)
	lines := strings.Split(strings.TrimSpace(s.stderr.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("no log line")
	}
	var named bool
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		if m["@timestamp"] == nil || m["@message"] == nil || m["level"] == nil {
			t.Errorf("line without @timestamp, @message or level: %q", l)
		}
		named = named || strings.Contains(l, "MEMCACHE_HOST_PORT")
	}
	if !named {
		t.Errorf("the not-acted-on line is missing: %q", s.stderr.String())
	}

	t.Setenv("LOG_FORMAT", "logfmt")
	var out, errb testlog.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if code := runServe(ctx, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "logfmt") {
		t.Errorf("LOG_FORMAT=logfmt: exit %d, %q; want 2 naming it", code, errb.String())
	}
}

// daemon.NewLogger, the logger of proxy and the other commands, follows
// LOG_FORMAT too.
func TestNewLoggerFollowsLOG_FORMAT(t *testing.T) {
	t.Setenv("LOG_FORMAT", "JSON")
	var b testlog.Buffer
	l, err := daemon.NewLogger("info", &b)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "k", "v")
	var m map[string]any
	if err := json.Unmarshal([]byte(b.String()), &m); err != nil || m["@message"] != "hello" || m["level"] != "info" {
		t.Errorf("LOG_FORMAT=JSON: %q (%v)", b.String(), err)
	}
	t.Setenv("LOG_FORMAT", "xml")
	if _, err := daemon.NewLogger("info", &b); err == nil {
		t.Error("LOG_FORMAT=xml: no error")
	}
}
