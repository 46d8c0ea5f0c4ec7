package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/ratelimitenv"
	"github.com/sluicehq/sluice/internal/testlog"
)

// FORCE_START_WITHOUT_INITIAL_CONFIG=true starts serve although its config
// does not load, with no rules (every descriptor OK) until a reload loads
// one; before, the variable was only named as not acted on and serve
// exited 1.
func TestServeForceStartWithoutInitialConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	writeFile(t, cfg, cfgBroken)
	t.Setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", "true")
	s := launch(t, "-config", cfg)
	if !strings.Contains(s.stderr.String(), "requets_per_unit") {
		t.Errorf("the config's error is not logged: %s", s.stderr.String())
	}
	if got := post(t, s.url, reqK); got != 200 {
		t.Errorf("without a config: %d, want 200 (no rule applies)", got)
	}
	if got := getStatus(t, s.url+"/healthcheck"); got != 200 {
		t.Errorf("health without a config and without HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: %d, want 200", got)
	}
	writeAtomic(t, cfg, cfgBlocked)
	eventually(t, "the fixed config to be loaded on its change", func() bool { return post(t, s.url, reqK) == 429 })
}

// A config file that does not exist yet (written later by a sidecar) is
// watched for too under FORCE_START_WITHOUT_INITIAL_CONFIG.
func TestServeForceStartLoadsAConfigWrittenLater(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	t.Setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", "1")
	s := launch(t, "-config", cfg)
	if got := post(t, s.url, reqK); got != 200 {
		t.Errorf("without a config: %d, want 200", got)
	}
	writeAtomic(t, cfg, cfgBlocked)
	eventually(t, "the new config to be loaded", func() bool { return post(t, s.url, reqK) == 429 })
}

// Without it (false or unset), a config that does not load is exit
// status 1, as before: Sluice never serves without the operator's rules
// unless told to.
func TestServeWithoutForceStartRefusesABrokenConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, cfgBroken)
	for _, v := range []string{"", "false"} {
		t.Setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", v)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var out, errb testlog.Buffer
		code := runServe(ctx, []string{"-config", cfg, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb)
		cancel()
		if code != 1 || !strings.Contains(errb.String(), "requets_per_unit") {
			t.Errorf("FORCE_START_WITHOUT_INITIAL_CONFIG=%q: exit %d, stderr %q; want 1 naming the error", v, code, errb.String())
		}
	}
}

// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true fails the health checks
// while no config with a domain is running (503 on /healthcheck), and
// passes them once one is; a failed reload keeps the running config and
// its health. Before, the variable was named as not acted on and serve
// reported healthy without any rule.
func TestServeHealthyWithAtLeastOneConfigLoaded(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	writeFile(t, cfg, cfgBroken)
	t.Setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", "true")
	t.Setenv("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")
	s := launch(t, "-config", cfg)
	if got := getStatus(t, s.url+"/healthcheck"); got != 503 {
		t.Errorf("health without a config: %d, want 503", got)
	}
	writeAtomic(t, cfg, cfgUnlimited)
	eventually(t, "healthy once a config is loaded", func() bool { return getStatus(t, s.url+"/healthcheck") == 200 })
	writeAtomic(t, cfg, cfgBroken)
	eventually(t, "the broken reload to be counted", func() bool { return metric(t, s.url, "sluice_config_reload_failures_total") >= 1 })
	if got := getStatus(t, s.url+"/healthcheck"); got != 200 {
		t.Errorf("health after a failed reload that kept the running config: %d, want 200", got)
	}
}

// With a config at start-up, the setting changes nothing: serve is healthy
// from the start, with the built-in example too.
func TestServeHealthyWithConfigAtStart(t *testing.T) {
	t.Setenv("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")
	s := launch(t)
	if got := getStatus(t, s.url+"/healthcheck"); got != 200 {
		t.Errorf("health with the built-in example: %d, want 200", got)
	}
}

// The two are envoyproxy/ratelimit's, acted on: never in the not-acted-on
// line.
func TestServeActsOnStartConfigEnv(t *testing.T) {
	for _, name := range []string{"FORCE_START_WITHOUT_INITIAL_CONFIG", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"} {
		t.Setenv(name, "true")
	}
	for _, n := range ratelimitenv.NotActedOn() {
		if strings.HasPrefix(n, "FORCE_START") || strings.HasPrefix(n, "HEALTHY_WITH") {
			t.Errorf("notActedOn() names %s", n)
		}
	}
	// A value that is no boolean is refused, not read as false.
	t.Setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", "yes")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // ends a serve that did start
	defer cancel()
	var out, errb testlog.Buffer
	if code := runServe(ctx, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "FORCE_START_WITHOUT_INITIAL_CONFIG") {
		t.Errorf("FORCE_START_WITHOUT_INITIAL_CONFIG=yes: exit %d, stderr %q; want 2 naming it", code, errb.String())
	}
}

// An empty config directory is a config of no domains, as
// envoyproxy/ratelimit loads it: serve starts without
// FORCE_START_WITHOUT_INITIAL_CONFIG and allows every descriptor, a file
// written later is loaded, and removing the last file loads no rules
// again (with FORCE_START_WITHOUT_INITIAL_CONFIG too) instead of keeping
// the old ones. Before, serve exited 1 ("no .yaml or .yml files in
// directory") and a removed last file was a failed reload that kept its
// rules.
func TestServeStartsWithAnEmptyConfigDir(t *testing.T) {
	for _, force := range []string{"", "true"} {
		t.Run("FORCE_START_WITHOUT_INITIAL_CONFIG="+force, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", force)
			s := launch(t, "-config", dir)
			if got := post(t, s.url, reqK); got != 200 {
				t.Errorf("with no rules: %d, want 200", got)
			}
			cfg := filepath.Join(dir, "d.yaml")
			writeAtomic(t, cfg, cfgBlocked)
			eventually(t, "the new file to be loaded", func() bool { return post(t, s.url, reqK) == 429 })
			if err := os.Remove(cfg); err != nil {
				t.Fatal(err)
			}
			eventually(t, "no rules once the last file is removed", func() bool { return post(t, s.url, reqK) == 200 })
			if n := metric(t, s.url, "sluice_config_reload_failures_total"); n != 0 {
				t.Errorf("reload failures: %v, want 0", n)
			}
		})
	}
}

// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED over a config directory: 503
// while it is empty, 200 once a file with a domain is loaded, 503 again
// once the last file is removed (envoyproxy/ratelimit fails its config
// health component on a config of no domains). Before, serve did not
// start on the empty directory, and the removal kept the old domain and
// its 200.
func TestServeHealthFollowsTheConfigDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")
	s := launch(t, "-config", dir)
	if got := getStatus(t, s.url+"/healthcheck"); got != 503 {
		t.Errorf("health with an empty directory: %d, want 503", got)
	}
	cfg := filepath.Join(dir, "d.yaml")
	writeAtomic(t, cfg, cfgUnlimited)
	eventually(t, "healthy once a file with a domain is loaded", func() bool { return getStatus(t, s.url+"/healthcheck") == 200 })
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "unhealthy once the last file is removed", func() bool { return getStatus(t, s.url+"/healthcheck") == 503 })
}

// gRPC health follows HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED as GET
// /healthcheck does, under "" and envoyproxy/ratelimit's "ratelimit":
// Check and Watch report NOT_SERVING while the directory is empty, SERVING
// once a file with a domain is loaded, NOT_SERVING again once the last
// file is removed. Before, Watch streamed SERVING from the start and
// never changed (only Check asked the setting).
func TestServeGRPCHealthFollowsTheConfigDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")
	s := launch(t, "-config", dir)
	conn := dial(t, s.grpc, insecure.NewCredentials())
	t.Cleanup(func() { conn.Close() })
	names := []string{"", "ratelimit"}
	var watches []healthpb.Health_WatchClient
	for _, name := range names {
		watches = append(watches, watchHealth(t, conn, name))
	}
	check := func(want healthpb.HealthCheckResponse_ServingStatus, when string) {
		t.Helper()
		for i, name := range names {
			recvStatus(t, watches[i], want)
			r, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: name})
			if err != nil || r.GetStatus() != want {
				t.Errorf("%s: Check(%q): %v, %v; want %v", when, name, r.GetStatus(), err, want)
			}
		}
	}
	check(healthpb.HealthCheckResponse_NOT_SERVING, "with an empty directory")
	cfg := filepath.Join(dir, "d.yaml")
	writeAtomic(t, cfg, cfgUnlimited)
	check(healthpb.HealthCheckResponse_SERVING, "once a file with a domain is loaded")
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	check(healthpb.HealthCheckResponse_NOT_SERVING, "once the last file is removed")
}
