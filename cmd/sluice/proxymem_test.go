package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A proxy whose file sizes its memory store (memory_max_bytes, as NGINX's
// zone=name:1m) holds a flood of distinct 2 KB keys within those bytes,
// evicting, and its metrics say the budget it acts on; the flag wins over
// the file.
func TestProxyMemoryMaxBytesBoundsAFloodOfKeys(t *testing.T) {
	t.Parallel() // waits on the proxy; touches no process-wide state
	up := okUpstream(t)
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	writeFile(t, cfg, `
memory_max_bytes: 1m
limits:
  - {name: per_key, key: "header:X-Key", rate: 10r/s}
routes:
  - {name: all, match: /, limits: [per_key]}
`)
	p := launchProxy(t, "-config", cfg, "-upstream", up)
	pad := strings.Repeat("k", 2000)
	for i := range 1500 { // 1,500 keys of 2 KB: 3 MB of keys alone
		req, _ := http.NewRequest(http.MethodGet, p.url+"/x", nil)
		req.Header.Set("X-Key", pad+strconv.Itoa(i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("key %d: status %d", i, resp.StatusCode)
		}
	}
	maxBytes, used := metric(t, p.admin, "sluice_memstore_max_bytes"), metric(t, p.admin, "sluice_memstore_bytes")
	if maxBytes != 1<<20 {
		t.Fatalf("sluice_memstore_max_bytes %v, want %d", maxBytes, 1<<20)
	}
	if used > maxBytes {
		t.Fatalf("the store holds %v bytes, over its budget of %v", used, maxBytes)
	}
	if ev := metric(t, p.admin, "sluice_memstore_evictions_total"); ev == 0 {
		t.Fatalf("no eviction: the flood of 3 MB did not meet the 1 MiB budget (%v bytes held)", used)
	}

	// The flag wins over the file.
	p2 := launchProxy(t, "-config", cfg, "-upstream", up, "-memory-max-bytes", "2m", "-memory-max-keys", "50")
	if v := metric(t, p2.admin, "sluice_memstore_max_bytes"); v != 2<<20 {
		t.Fatalf("with -memory-max-bytes 2m: sluice_memstore_max_bytes %v", v)
	}
}

// A malformed memory_max_bytes or memory_max_keys is refused with the
// file's line; so are a flag of 0 and a malformed $MEMSTORE_MAX_BYTES.
func TestProxyRefusesAMalformedMemorySize(t *testing.T) {
	up := okUpstream(t)
	for _, tt := range []struct {
		name, file string
		args       []string
		env, want  string
	}{
		{"bytes not a size", "listen: \":0\"\nmemory_max_bytes: 10mb\n", nil, "", "proxy.yaml:2:"},
		{"bytes 0", "memory_max_bytes: 0\n", nil, "", "proxy.yaml:1:"},
		{"keys not a number", "memory_max_keys: many\n", nil, "", "proxy.yaml:1:"},
		{"keys 0", "memory_max_keys: 0\n", nil, "", "proxy.yaml:1:"},
		{"flag 0", "", []string{"-memory-max-bytes", "0"}, "", "-memory-max-bytes 0"},
		{"keys flag 0", "", []string{"-memory-max-keys", "0"}, "", "-memory-max-keys 0"},
		{"env malformed", "", nil, "10x", "MEMSTORE_MAX_BYTES"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("MEMSTORE_MAX_BYTES", tt.env)
			cfg := filepath.Join(t.TempDir(), "proxy.yaml")
			writeFile(t, cfg, tt.file)
			var out, errb bytes.Buffer
			args := append([]string{"-check", "-config", cfg, "-upstream", up}, tt.args...)
			if code := runProxy(t.Context(), args, &out, &errb); code == 0 || !strings.Contains(errb.String(), tt.want) {
				t.Fatalf("code %d, stderr %q: want a refusal naming %q", code, errb.String(), tt.want)
			}
		})
	}
}

// okUpstream starts an upstream that answers 200, closed when the test
// ends, and returns its URL.
func okUpstream(t *testing.T) string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(up.Close)
	return up.URL
}
