package main

import (
	"net/http"
	"strings"
	"testing"
)

// serve's /metrics has the Go runtime's and the process's series, as the
// proxy's has: go_goroutines, go_memstats_*, process_resident_memory_bytes
// and process_open_fds. Before, it had none of them.
func TestServeMetricsHaveGoAndProcessCollectors(t *testing.T) {
	s := launch(t)
	_, b := call(t, http.MethodGet, s.url+"/metrics", "", nil)
	for _, name := range []string{"go_goroutines ", "go_memstats_heap_alloc_bytes ", "process_resident_memory_bytes ", "process_open_fds "} {
		if !strings.Contains(string(b), "\n"+name) {
			t.Errorf("/metrics has no %s", strings.TrimSpace(name))
		}
	}
}
