package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/service"
)

// serve's POST /json takes bodies of service.MaxJSONBody bytes at most
// (1 MiB, as NGINX's client_max_body_size default): a larger one is 413
// with a message saying so, whether its Content-Length announces it or
// it comes chunked.
func TestServeJSONBodyOverTheCapIs413(t *testing.T) {
	url := launch(t).url
	big := `{"domain":"` + strings.Repeat("x", service.MaxJSONBody) + `"}`
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = io.MultiReader(body) // no length known: chunked
		}
		resp, err := http.Post(url+"/json", "application/json", body)
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "exceeds 1048576 bytes") {
			t.Errorf("chunked %v: %d %q, want 413 saying the cap", chunked, resp.StatusCode, msg)
		}
	}
}
