package service_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// BenchmarkJSON is one POST /json decision over a loopback keep-alive
// connection, the body read under the byte budget and its deadlines.
func BenchmarkJSON(b *testing.B) {
	h := start(b, t0, service.Config{Rules: mongo(1<<30, config.Second)})
	c := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Post(h.http.URL+"/json", "application/json", strings.NewReader(smallJSON))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
