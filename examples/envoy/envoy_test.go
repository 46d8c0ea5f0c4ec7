// Package envoy_test checks the Envoy example: envoy.yaml is a valid Envoy
// bootstrap, its rate limit actions produce the descriptors README.md
// lists, and a real `sluice serve` with config/ answers them as README.md says.
package envoy_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	// The typed configs envoy.yaml names, so that its Any fields resolve.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// loadBootstrap decodes envoy.yaml into Envoy's Bootstrap: an unknown field
// or an Any whose type is not linked in is an error, and so is a value
// Envoy's own validation rules refuse.
func loadBootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	data, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		t.Fatalf("envoy.yaml is not YAML: %v", err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		t.Fatalf("envoy.yaml as JSON: %v", err)
	}
	var b bootstrapv3.Bootstrap
	if err := (protojson.UnmarshalOptions{}).Unmarshal(js, &b); err != nil {
		t.Fatalf("envoy.yaml is not an Envoy bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml fails Envoy's validation rules: %v", err)
	}
	return &b
}

// example is what the test reads out of the decoded bootstrap.
type example struct {
	filter *ratelimitv3.RateLimit
	vhost  *routev3.VirtualHost
	hcm    *hcmv3.HttpConnectionManager
}

// readExample finds the HTTP connection manager, its rate limit filter and
// virtual host, resolving each typed config.
func readExample(t *testing.T, b *bootstrapv3.Bootstrap) example {
	t.Helper()
	var ex example
	ls := b.GetStaticResources().GetListeners()
	if len(ls) != 1 || len(ls[0].GetFilterChains()) != 1 || len(ls[0].GetFilterChains()[0].GetFilters()) != 1 {
		t.Fatal("want one listener with one filter chain of one filter")
	}
	ex.hcm = new(hcmv3.HttpConnectionManager)
	if err := ls[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(ex.hcm); err != nil {
		t.Fatalf("the listener's filter: %v", err)
	}
	for _, f := range ex.hcm.GetHttpFilters() {
		if f.GetName() == "envoy.filters.http.ratelimit" {
			ex.filter = new(ratelimitv3.RateLimit)
			if err := f.GetTypedConfig().UnmarshalTo(ex.filter); err != nil {
				t.Fatal(err)
			}
		}
	}
	vhs := ex.hcm.GetRouteConfig().GetVirtualHosts()
	if ex.filter == nil || len(vhs) != 1 {
		t.Fatal("want a rate limit filter and one virtual host")
	}
	ex.vhost = vhs[0]
	return ex
}

// envoy.yaml is an Envoy bootstrap with every typed config resolved; its
// rate limit filter asks Sluice's gRPC port, refuses when Sluice fails, and
// leaves the rate limit headers to Sluice.
func TestEnvoyConfig(t *testing.T) {
	b := loadBootstrap(t)
	ex := readExample(t, b)
	f := ex.filter
	if f.GetDomain() != "edge" || !f.GetFailureModeDeny() ||
		f.GetEnableXRatelimitHeaders() != ratelimitv3.RateLimit_OFF {
		t.Errorf("the filter has domain %q, failure_mode_deny %v, x-ratelimit headers %v; want edge, true, OFF",
			f.GetDomain(), f.GetFailureModeDeny(), f.GetEnableXRatelimitHeaders())
	}
	cluster := f.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if cluster != "sluice" || f.GetRateLimitService().GetTransportApiVersion().String() != "V3" {
		t.Errorf("the rate limit service is cluster %q (API %v), want sluice over V3", cluster, f.GetRateLimitService().GetTransportApiVersion())
	}
	var found bool
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() != "sluice" {
			continue
		}
		found = true
		sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if sa.GetAddress() != "sluice" || sa.GetPortValue() != 8081 {
			t.Errorf("cluster sluice points at %s:%d, want sluice:8081 (serve's gRPC port)", sa.GetAddress(), sa.GetPortValue())
		}
		if _, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]; !ok {
			t.Error("cluster sluice does not speak HTTP/2, which gRPC needs")
		}
	}
	if !found {
		t.Error("no cluster sluice")
	}
}

// request is what Envoy's rate limit actions read of a request.
type request struct {
	path    string
	headers map[string]string
	peer    string // the connection's peer (use_remote_address: true)
}

// descriptors applies the rate limits of the route request matches, as
// Envoy does: the route's, then the virtual host's when the route includes
// them (or has none); a descriptor one of whose actions finds nothing is
// not sent. Only the actions envoy.yaml uses are known; another is an error.
func descriptors(t *testing.T, vh *routev3.VirtualHost, r request) []string {
	t.Helper()
	var route *routev3.Route
	for _, rt := range vh.GetRoutes() {
		if strings.HasPrefix(r.path, rt.GetMatch().GetPrefix()) {
			route = rt
			break
		}
	}
	if route == nil {
		t.Fatalf("no route matches %s", r.path)
	}
	limits := slices.Clone(route.GetRoute().GetRateLimits())
	includeVH := len(limits) == 0
	if pc, ok := route.GetTypedPerFilterConfig()["envoy.filters.http.ratelimit"]; ok {
		var per ratelimitv3.RateLimitPerRoute
		if err := pc.UnmarshalTo(&per); err != nil {
			t.Fatal(err)
		}
		includeVH = includeVH || per.GetVhRateLimits() == ratelimitv3.RateLimitPerRoute_INCLUDE
	}
	if includeVH {
		limits = append(limits, vh.GetRateLimits()...)
	}
	var out []string
	for _, rl := range limits {
		if d, ok := descriptor(t, rl, r); ok {
			out = append(out, d)
		}
	}
	return out
}

// descriptor applies one rate limit's actions: its entries as "key=value"
// joined by commas, and whether it is sent.
func descriptor(t *testing.T, rl *routev3.RateLimit, r request) (string, bool) {
	t.Helper()
	var entries []string
	for _, a := range rl.GetActions() {
		switch {
		case a.GetRemoteAddress() != nil:
			entries = append(entries, "remote_address="+r.peer)
		case a.GetGenericKey() != nil:
			k := a.GetGenericKey().GetDescriptorKey()
			if k == "" {
				k = "generic_key"
			}
			entries = append(entries, k+"="+a.GetGenericKey().GetDescriptorValue())
		case a.GetRequestHeaders() != nil:
			h := a.GetRequestHeaders()
			v, ok := r.headers[h.GetHeaderName()]
			if !ok {
				return "", false
			}
			entries = append(entries, h.GetDescriptorKey()+"="+v)
		default:
			t.Fatalf("an action the test does not model: %v", a)
		}
	}
	return strings.Join(entries, ","), true
}

// The descriptors envoy.yaml's actions produce for README.md's requests are
// the ones written out here, and a real `sluice serve` with config/ answers
// them as README.md says: a user's 4th request in a minute and /expensive's
// 3rd are over the limit.
func TestEnvoyDescriptorsAgainstSluice(t *testing.T) {
	vh := readExample(t, loadBootstrap(t)).vhost
	alice := request{path: "/", headers: map[string]string{"x-user": "alice"}, peer: "192.0.2.10"}
	anon := request{path: "/", headers: map[string]string{}, peer: "192.0.2.11"}
	expensive := request{path: "/expensive", headers: map[string]string{}, peer: "192.0.2.12"}
	want := map[string]struct {
		r     request
		descs []string
	}{
		"alice":     {alice, []string{"remote_address=192.0.2.10", "user=alice"}},
		"anonymous": {anon, []string{"remote_address=192.0.2.11"}},
		"expensive": {expensive, []string{"generic_key=expensive", "remote_address=192.0.2.12"}},
	}
	for name, w := range want {
		if got := descriptors(t, vh, w.r); !slices.Equal(got, w.descs) {
			t.Errorf("%s: envoy.yaml's actions produce %q, want %q", name, got, w.descs)
		}
	}

	client := startSluice(t)
	ask := func(descs []string) *rlsv3.RateLimitResponse {
		t.Helper()
		req := &rlsv3.RateLimitRequest{Domain: "edge"}
		for _, d := range descs {
			k, v, _ := strings.Cut(d, "=")
			req.Descriptors = append(req.Descriptors, &commonrl.RateLimitDescriptor{
				Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: k, Value: v}},
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("ShouldRateLimit(%q): %v", descs, err)
		}
		return resp
	}
	codes := func(descs []string, n int) []string {
		var c []string
		for range n {
			c = append(c, ask(descs).GetOverallCode().String())
		}
		return c
	}
	if got := codes(want["alice"].descs, 4); !slices.Equal(got, []string{"OK", "OK", "OK", "OVER_LIMIT"}) {
		t.Errorf("alice's 4 requests: %v, want OK OK OK OVER_LIMIT (3 per minute per user)", got)
	}
	if got := codes(want["expensive"].descs, 3); !slices.Equal(got, []string{"OK", "OK", "OVER_LIMIT"}) {
		t.Errorf("3 requests to /expensive: %v, want OK OK OVER_LIMIT (2 per minute for everyone)", got)
	}
	resp := ask(want["anonymous"].descs)
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Errorf("an anonymous request: %v, want OK", resp.GetOverallCode())
	}
	var names []string
	for _, h := range resp.GetResponseHeadersToAdd() {
		names = append(names, strings.ToLower(h.GetKey()))
	}
	if !slices.Contains(names, "ratelimit") || !slices.Contains(names, "ratelimit-policy") {
		t.Errorf("Sluice's answer carries the headers %v, want RateLimit and RateLimit-Policy (draft-11) for Envoy to add", names)
	}
}

// startSluice builds sluice, runs `sluice serve -config config` on free
// loopback ports until the test ends, and returns a client of its gRPC port.
func startSluice(t *testing.T) rlsv3.RateLimitServiceClient {
	t.Helper()
	gobin := "go" // go test puts its own GOROOT/bin first in PATH
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command(gobin, "build", "-o", bin, "../../cmd/sluice")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "-config", "config", "-http-addr", httpAddr, "-grpc-addr", grpcAddr)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no REDIS_URL from the caller: the memory store
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("sluice serve's output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice serve was not healthy within 60 s (last error %v)", err)
		}
		time.Sleep(50 * time.Millisecond) // waiting for a real process, with a deadline
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// compose.yaml runs what envoy.yaml points at: a service sluice whose gRPC
// port is serve's default, 8081, with config/ mounted where RUNTIME_ROOT
// leads; an upstream listening on 8080; Envoy reading envoy.yaml.
func TestComposeMatchesEnvoy(t *testing.T) {
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"envoy", "sluice", "redis", "upstream"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("compose.yaml has no service %s", name)
		}
	}
	s := c.Services["sluice"]
	dir := s.Environment["RUNTIME_ROOT"] + "/" + s.Environment["RUNTIME_SUBDIRECTORY"] + "/config"
	if !slices.Contains(s.Volumes, "./config:"+dir+":ro") {
		t.Errorf("sluice's volumes %q do not mount ./config at %s", s.Volumes, dir)
	}
	if !strings.HasPrefix(s.Environment["REDIS_URL"], "redis:") {
		t.Errorf("sluice's REDIS_URL %q is not the redis service", s.Environment["REDIS_URL"])
	}
	if !slices.Contains(c.Services["envoy"].Volumes, "./envoy.yaml:/etc/envoy/envoy.yaml:ro") {
		t.Errorf("envoy's volumes %q do not mount envoy.yaml", c.Services["envoy"].Volumes)
	}
	if !slices.Contains(c.Services["upstream"].Command, "-listen=:8080") {
		t.Errorf("the upstream's command %q does not listen on 8080, where envoy.yaml sends", c.Services["upstream"].Command)
	}
}
