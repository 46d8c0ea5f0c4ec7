package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/ratelimitenv"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/internal/testlog"
)

// envoyproxy/ratelimit settings whose silent neglect would expose the
// service or serve other rules than the operator's are refused (exit 2,
// naming the variable) instead of being ignored: gRPC over TLS without its
// certificate and key (Sluice would have to serve plaintext), a config
// type other than FILE and GRPC_XDS_SOTW (Sluice would serve its built-in
// example). Before, serve started with each of them.
func TestServeRefusesEnvItCannotHonour(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"GRPC_SERVER_USE_TLS", "true"},
		{"CONFIG_TYPE", "ETCD"},
	} {
		t.Run(tt.name, func(t *testing.T) { refusesEnv(t, tt.name, tt.value) })
	}
	// Their harmless values start.
	for _, tt := range []struct{ name, value string }{
		{"GRPC_SERVER_USE_TLS", "false"}, {"CONFIG_TYPE", "FILE"}, {"GRPC_UDS", ""},
	} {
		t.Setenv(tt.name, tt.value)
	}
	launch(t)
}

// Every other envoyproxy/ratelimit variable Sluice does not act on is named
// in the one start-up line: before, REDIS_POOL_SIZE, REDIS_PERSECOND,
// EXPIRATION_JITTER_MAX_SECONDS and the rest were ignored without a word.
func TestServeNamesEveryEnvItDoesNotActOn(t *testing.T) {
	for _, name := range []string{"REDIS_POOL_SIZE", "REDIS_PERSECOND_URL",
		"EXPIRATION_JITTER_MAX_SECONDS",
		"REDIS_TLS_CACERT", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"} {
		t.Setenv(name, "x")
		// The Redis variables are named, with why, by stores.RedisOptions.
		named := append(ratelimitenv.NotActedOn(), (&stores.RedisOptions{}).NotActedOn("memory")...)
		if !slices.ContainsFunc(named, func(s string) bool {
			return s == name || strings.HasPrefix(s, name+"=") || strings.HasPrefix(s, name+" (")
		}) {
			t.Errorf("%s set: not acted on = %v, want it named", name, named)
		}
	}
}

// envoyproxy/ratelimit's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and
// LIMIT_RESET_HEADER name the legacy headers; before, they were ignored and
// the defaults sent.
func TestServeLegacyHeaderNamesFromEnv(t *testing.T) {
	t.Setenv("LIMIT_RESPONSE_HEADERS_ENABLED", "true")
	t.Setenv("LIMIT_LIMIT_HEADER", "X-RL-Limit")
	t.Setenv("LIMIT_REMAINING_HEADER", "X-RL-Remaining")
	t.Setenv("LIMIT_RESET_HEADER", "X-RL-Reset")
	s := launch(t)
	resp, err := http.Post(s.url+"/json", "application/json",
		strings.NewReader(`{"domain":"example","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for name, want := range map[string]string{"X-RL-Limit": "3", "X-RL-Remaining": "2"} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q (headers %v)", name, got, want, resp.Header)
		}
	}
	if resp.Header.Get("X-RL-Reset") == "" || resp.Header.Get("RateLimit-Limit") != "" {
		t.Errorf("headers %v: want X-RL-Reset and no RateLimit-Limit", resp.Header)
	}
}

// A -failure-mode that is not a mode is refused whatever the store: before,
// with the memory store it was accepted without a word, and the typo
// stopped serve only once it was pointed at Redis.
func TestServeRefusesABadFailureModeOnEveryStore(t *testing.T) {
	var out, errb testlog.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	code := runServe(ctx, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-failure-mode", "bogus"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "bogus") {
		t.Errorf("-failure-mode bogus on the memory store: exit %d, stderr %q; want 2 naming it", code, errb.String())
	}
}

// Settings that the chosen store makes moot are named in the start-up
// line of what is not acted on: before, -local-cache, -failure-mode and
// -health-needs-store with the memory store, and -memory-clock-resolution
// with Redis, were accepted without a word.
func TestServeNamesFlagsItDoesNotActOn(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"-local-cache", "-failure-mode", "closed", "-health-needs-store"}, []string{"-local-cache", "-failure-mode", "-health-needs-store"}},
		{[]string{"-store", "redis://127.0.0.1:1", "-memory-clock-resolution", "100us"}, []string{"-memory-clock-resolution"}},
		// GRPC_SERVER_TLS_CERT and _KEY without GRPC_SERVER_USE_TLS:
		// plaintext, as envoyproxy/ratelimit serves then, and said.
		{[]string{"-grpc-tls-cert", "tls.crt", "-grpc-tls-key", "tls.key"}, []string{"-grpc-tls-cert", "-grpc-tls-key"}},
	} {
		s := launch(t, tt.args...)
		line := ""
		for l := range strings.SplitSeq(s.stderr.String(), "\n") {
			if strings.Contains(l, "not acted on") {
				line = l
			}
		}
		for _, w := range tt.want {
			if !strings.Contains(line, w) {
				t.Errorf("serve %v: start-up line %q does not name %s", tt.args, line, w)
			}
		}
		s.stop(t)
	}
}

// refusesEnv checks that serve, with the variable name set to value,
// exits 2 naming it (within 2 seconds).
func refusesEnv(t *testing.T, name, value string) {
	t.Helper()
	t.Setenv(name, value)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out, errb testlog.Buffer
	code := runServe(ctx, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), name) {
		t.Errorf("%s=%s: exit %d, stderr %q; want 2 naming it", name, value, code, errb.String())
	}
}

// envoyproxy/ratelimit's boolean and numeric variables that do not parse
// are refused (exit 2, naming them), as envoyproxy/ratelimit refuses
// them: before, REDIS_TLS=yes was read as false without a word (plain TCP
// to a Redis the operator meant to reach over TLS), and SHADOW_MODE=on or
// LOCAL_CACHE_SIZE_IN_BYTES=1MB likewise fell back to their defaults.
func TestServeRefusesMalformedEnv(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"REDIS_TLS", "yes"},
		{"SHADOW_MODE", "on"},
		{"LIMIT_RESPONSE_HEADERS_ENABLED", "enabled"},
		{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "y"},
		{"RUNTIME_WATCH_ROOT", "no"},
		{"LOCAL_CACHE_SIZE_IN_BYTES", "1MB"},
		{"ALLOW_REFUNDS", "yes"},
	} {
		t.Run(tt.name, func(t *testing.T) { refusesEnv(t, tt.name, tt.value) })
	}
}

// A boolean variable with spaces around it is read as the start-up check
// reads it: the check (envflag.Errs.Bools) accepted " true" (it trims), while
// the reader (envflag.Bool) did not trim and fell back to the default, so
// SHADOW_MODE=" true" passed the check and did nothing.
func TestEnvBoolReadsWhatTheCheckAccepts(t *testing.T) {
	t.Setenv("SHADOW_MODE", " true ")
	var errs envflag.Errs
	errs.Bools("SHADOW_MODE")
	if len(errs) != 0 {
		t.Fatalf("the start-up check refused %q: %v", " true ", errs)
	}
	if !envflag.Bool("SHADOW_MODE", false) {
		t.Errorf(`envflag.Bool("SHADOW_MODE") with " true " = false, want true`)
	}
}

// Refunds (is_negative_hits) are off unless -allow-refunds or
// ALLOW_REFUNDS turns them on, the flag over the variable; before, every
// caller's is_negative_hits gave units back and nothing turned it off.
func TestServeAllowRefundsFlagAndEnv(t *testing.T) {
	for _, tt := range []struct {
		env  string // ALLOW_REFUNDS; "" unset
		args []string
		want bool
	}{
		{"", nil, false},
		{"true", nil, true},
		{"", []string{"-allow-refunds"}, true},
		{"true", []string{"-allow-refunds=false"}, false},
		{"false", nil, false},
	} {
		if tt.env != "" {
			t.Setenv("ALLOW_REFUNDS", tt.env)
		}
		var out, errb strings.Builder
		s, code, done := parseServeFlags(tt.args, &out, &errb)
		if done {
			t.Fatalf("ALLOW_REFUNDS=%q %v: exit %d: %s", tt.env, tt.args, code, errb.String())
		}
		if got := s.serviceConfig().AllowRefunds; got != tt.want {
			t.Errorf("ALLOW_REFUNDS=%q %v: service AllowRefunds = %v, want %v", tt.env, tt.args, got, tt.want)
		}
	}
}

// -headers's default follows the environment: an operator who swaps
// envoyproxy/ratelimit's image keeps its answers, which carry no rate limit
// header unless LIMIT_RESPONSE_HEADERS_ENABLED asks for them (Sluice's
// draft-11 headers, under Envoy Gateway, spell namespaces and policy names
// in RateLimit-Policy); SLUICE_HEADERS chooses any mode; a new user with
// none of these gets draft-11.
func TestServeHeadersDefaultFollowsEnvironment(t *testing.T) {
	names := append([]string{"SLUICE_HEADERS", "LIMIT_RESPONSE_HEADERS_ENABLED"}, ratelimitenv.Names(func(v ratelimitenv.Var) bool { return v.Deployment })...)
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "draft-11"},
		{map[string]string{"RUNTIME_ROOT": "/data"}, nil, "off"},
		{map[string]string{"REDIS_URL": "redis:6379", "USE_STATSD": "false"}, nil, "off"},
		{map[string]string{"RUNTIME_ROOT": "/data", "LIMIT_RESPONSE_HEADERS_ENABLED": "true"}, nil, "legacy"},
		{map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "false"}, nil, "off"},
		{map[string]string{"RUNTIME_ROOT": "/data", "SLUICE_HEADERS": "draft-11"}, nil, "draft-11"},
		{map[string]string{"SLUICE_HEADERS": "legacy"}, nil, "legacy"},
		{map[string]string{"RUNTIME_ROOT": "/data"}, []string{"-headers", "draft-11"}, "draft-11"},
	} {
		for _, n := range names {
			t.Setenv(n, c.env[n]) // restored at the end of the test
			if _, ok := c.env[n]; !ok {
				os.Unsetenv(n)
			}
		}
		s, code, done := parseServeFlags(c.args, io.Discard, io.Discard)
		if done {
			t.Fatalf("env %v args %q: exit %d", c.env, c.args, code)
		}
		if s.o.headers != c.want {
			t.Errorf("env %v args %q: -headers %q, want %q", c.env, c.args, s.o.headers, c.want)
		}
	}
}

// SLUICE_HEADER_POLICY_NAMES (and -header-policy-names) chooses what
// RateLimit-Policy and RateLimit call a rule, so that a rule named after
// a Kubernetes namespace and policy (as Envoy Gateway names them) does not
// reach clients: hash and index replace the name, rule keeps it; any
// other value is refused with exit 2. Before, there was no such setting.
func TestServeHeaderPolicyNamesHideRuleNames(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "eg.yaml")
	writeFile(t, cfg, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: team-a/checkout, unit: hour, requests_per_unit: 5}\n")
	for _, c := range []struct{ env, want string }{
		{"", `"team-a/checkout";q=5;w=3600`},
		{"rule", `"team-a/checkout";q=5;w=3600`},
		{"hash", `"r`},
		{"index", `"0";q=5;w=3600`},
	} {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv("SLUICE_HEADER_POLICY_NAMES", c.env)
			s := launch(t, "-config", cfg, "-headers", "draft-11")
			resp, _ := call(t, http.MethodPost, s.url+"/json", reqK, nil)
			pol, rl := resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit")
			if !strings.HasPrefix(pol, c.want) {
				t.Errorf("RateLimit-Policy %q, want it to start %q", pol, c.want)
			}
			if name, _, _ := strings.Cut(pol, ";"); !strings.HasPrefix(rl, name+";") {
				t.Errorf("RateLimit %q names no item of RateLimit-Policy %q", rl, pol)
			}
			if c.env == "hash" || c.env == "index" {
				if strings.Contains(pol+rl, "team-a") {
					t.Errorf("the rule's name in RateLimit-Policy %q or RateLimit %q", pol, rl)
				}
			}
		})
	}
	t.Setenv("SLUICE_HEADER_POLICY_NAMES", "name")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // ends a serve that did start
	defer cancel()
	var out, errb testlog.Buffer
	if code := runServe(ctx, []string{"-config", cfg, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "SLUICE_HEADER_POLICY_NAMES") {
		t.Errorf("SLUICE_HEADER_POLICY_NAMES=name: exit %d, stderr %q; want 2 naming it", code, errb.String())
	}
}

// The start-up line names exactly the table's rows that are not acted on
// with the values given: every Never row set, every OnlyValue row set to
// another value, and nothing else of the table.
func TestServeStartupLineNamesExactlyTheTablesNotActedOnRows(t *testing.T) {
	var want []string
	for _, v := range ratelimitenv.Vars {
		switch v.Acted {
		case ratelimitenv.Never:
			t.Setenv(v.Name, "x")
			want = append(want, v.Name)
		case ratelimitenv.OnlyValue:
			other := map[string]string{"true": "false", "false": "true"}[v.Value]
			if other == "" {
				other = "other"
			}
			t.Setenv(v.Name, other)
			want = append(want, v.Name+"="+other)
		}
	}
	s := launch(t)
	line := ""
	for l := range strings.SplitSeq(s.stderr.String(), "\n") {
		if strings.Contains(l, "accepted and not acted on") {
			line = l
		}
	}
	m := regexp.MustCompile(`env="?([^" ]*)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no env in the start-up line %q", line)
	}
	if got := strings.Split(m[1], ","); !slices.Equal(got, want) {
		t.Errorf("start-up line names %v, want %v", got, want)
	}
}

// SLUICE_FLEET feeds -fleet; where no fleet is counted (the memory store,
// or Redis with -lease-share 0 and no -local-share auto) it is named in
// the start-up line of what is not acted on, as -fleet given there is
// refused: before, the variable was silently ignored.
func TestServeNamesSluiceFleetWhereNoFleetIsCounted(t *testing.T) {
	t.Setenv("SLUICE_FLEET", "other")
	for _, tt := range []struct {
		args  []string
		named bool
	}{
		{nil, true},
		{[]string{"-store", "redis://127.0.0.1:1", "-lease-share", "0"}, true},
		{[]string{"-store", "redis://127.0.0.1:1"}, false},
		{[]string{"-store", "redis://127.0.0.1:1", "-lease-share", "0", "-local-share", "auto"}, false},
	} {
		s, code, done := parseServeFlags(tt.args, &bytes.Buffer{}, &bytes.Buffer{})
		if done {
			t.Fatalf("%v: parse: exit %d", tt.args, code)
		}
		if err := s.o.remote.check(s.fs, &s.o); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if got := slices.Contains(mootFlags(s.fs, &s.o), "-fleet"); got != tt.named {
			t.Errorf("SLUICE_FLEET with %v: named as not acted on %v, want %v", tt.args, got, tt.named)
		}
	}
}
