package ratelimitenv

import (
	"path/filepath"
	"slices"
	"testing"
)

// -headers defaults to SLUICE_HEADERS, else to what envoyproxy/ratelimit
// sends: legacy when LIMIT_RESPONSE_HEADERS_ENABLED is true, off when it
// is false or malformed, or when its deployment variables are set; else
// draft-11.
func TestHeadersDefaultFollowsEnvoyRatelimitsVariables(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing set", nil, "draft-11"},
		{"SLUICE_HEADERS wins", map[string]string{"SLUICE_HEADERS": "draft-11", "LIMIT_RESPONSE_HEADERS_ENABLED": "true"}, "draft-11"},
		{"enabled", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true"}, "legacy"},
		{"disabled", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "false"}, "off"},
		{"malformed", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "maybe"}, "off"},
		{"enabled in a deployment", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "1", "RUNTIME_ROOT": "/data"}, "legacy"},
		{"a deployment", map[string]string{"RUNTIME_ROOT": ""}, "off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearTable(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if got := HeadersDefault(); got != tt.want {
				t.Errorf("HeadersDefault() = %q, want %q", got, tt.want)
			}
		})
	}
}

// The legacy headers' names are LIMIT_*_HEADER's, "" for an unset one.
func TestLegacyHeaderNamesAreTheVariables(t *testing.T) {
	clearTable(t)
	t.Setenv("LIMIT_LIMIT_HEADER", "L")
	t.Setenv("LIMIT_REMAINING_HEADER", "R")
	if got, want := LegacyHeaderNames(), (HeaderNames{Limit: "L", Remaining: "R"}); got != want {
		t.Errorf("LegacyHeaderNames() = %+v, want %+v", got, want)
	}
}

// The config directory is RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/
// RUNTIME_APPDIRECTORY ("config" by default), none without RUNTIME_ROOT;
// its root's parent is watched when the config is that directory and
// RUNTIME_WATCH_ROOT is not false.
func TestRuntimeConfigDirAndItsWatchedRoot(t *testing.T) {
	clearTable(t)
	if got := RuntimeConfigDir(); got != "" {
		t.Errorf("no RUNTIME_ROOT: %q, want none", got)
	}
	if got := RuntimeWatchRoots(false, ""); got != nil {
		t.Errorf("no RUNTIME_ROOT: watching %q", got)
	}
	root := filepath.Join(t.TempDir(), "current")
	t.Setenv("RUNTIME_ROOT", root)
	t.Setenv("RUNTIME_SUBDIRECTORY", "ratelimit")
	dir := filepath.Join(root, "ratelimit", "config")
	if got := RuntimeConfigDir(); got != dir {
		t.Errorf("RuntimeConfigDir() = %q, want %q", got, dir)
	}
	want := []string{filepath.Dir(root)}
	if got := RuntimeWatchRoots(false, dir); !slices.Equal(got, want) {
		t.Errorf("the config from RUNTIME_ROOT: watching %q, want %q", got, want)
	}
	for name, got := range map[string][]string{
		"-config given":       RuntimeWatchRoots(true, dir),
		"another config path": RuntimeWatchRoots(false, filepath.Join(root, "other")),
	} {
		if got != nil {
			t.Errorf("%s: watching %q, want none", name, got)
		}
	}
	t.Setenv("RUNTIME_WATCH_ROOT", "false")
	if got := RuntimeWatchRoots(false, dir); got != nil {
		t.Errorf("RUNTIME_WATCH_ROOT=false: watching %q, want none", got)
	}
	t.Setenv("RUNTIME_WATCH_ROOT", "true")
	t.Setenv("RUNTIME_APPDIRECTORY", "rules")
	if got := RuntimeConfigDir(); got != filepath.Join(root, "ratelimit", "rules") {
		t.Errorf("RUNTIME_APPDIRECTORY=rules: %q", got)
	}
}

// clearTable unsets every variable of the table, and those this file's
// functions read, for the rest of the test.
func clearTable(t *testing.T) {
	t.Helper()
	for _, v := range Vars {
		unsetenv(t, v.Name)
	}
	for _, name := range []string{"SLUICE_HEADERS", "LIMIT_RESPONSE_HEADERS_ENABLED", "LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER",
		"LIMIT_RESET_HEADER", "RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_WATCH_ROOT"} {
		unsetenv(t, name)
	}
}
