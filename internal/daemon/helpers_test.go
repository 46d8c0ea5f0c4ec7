package daemon

import (
	"flag"
	"io"
	"net/http"
	"testing"
)

// get returns the status and body of GET url, failing the test when the
// request cannot be sent or its body read.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// newTestFlagSet is a flag set that returns its errors.
func newTestFlagSet() *flag.FlagSet { return flag.NewFlagSet("test", flag.ContinueOnError) }
