package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testlog"
)

// -client-max-body-size caps request bodies as NGINX's
// client_max_body_size: over it, 413 and the upstream sees nothing; a size
// that does not parse is refused.
func TestProxyClientMaxBodySizeFlag(t *testing.T) {
	up, hits := discardingUpstream(t)
	p := launchProxy(t, "-upstream", up.URL, "-client-max-body-size", "1k")
	for _, tc := range []struct {
		n, want int
	}{{1024, 200}, {1025, 413}} {
		resp, err := http.Post(p.url+"/up", "text/plain", strings.NewReader(strings.Repeat("x", tc.n)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%d bytes under -client-max-body-size 1k: %d, want %d", tc.n, resp.StatusCode, tc.want)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the upstream saw %d requests, want 1", n)
	}
	var out, errb testlog.Buffer
	if code := runProxy(t.Context(), []string{"-upstream", up.URL, "-client-max-body-size", "1mb"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-client-max-body-size") {
		t.Errorf("-client-max-body-size 1mb: exit %d, %q; want 2 and why", code, errb.String())
	}
}
