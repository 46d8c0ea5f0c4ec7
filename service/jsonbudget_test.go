package service_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// The request bodies POST /json holds while they are read are bounded in
// bytes across all requests, not only per request: 400 connections each
// sending 1 MB and stalling took sluice serve from 90 MB to 500 MB RSS
// for the read timeout, and a connection cap of 40% of the open-file limit
// allows thousands. Past Config.MaxJSONBytesInFlight, a body being read
// is answered 503 with Retry-After, while small requests within it are
// still served; what a request held is given back when it ends.
func TestJSONBodiesInFlightAreBounded(t *testing.T) {
	h := start(t, t0, service.Config{Rules: mongo(5, config.Second), MaxJSONBytesInFlight: 64 << 10})
	addr := strings.TrimPrefix(h.http.URL, "http://")

	// A slow client: 40 KiB of a declared 100 KiB, then nothing.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 100<<10)
	slow.Write([]byte(`{"domain":"` + strings.Repeat("x", 40<<10)))
	time.Sleep(200 * time.Millisecond) // let the server read it: a real connection, no fake clock

	small := `{"domain":"mongo_cps","descriptors":[{"entries":[{"key":"database","value":"users"}]}]}`
	if code := postStatus(t, h.http.URL, small); code != http.StatusOK {
		t.Errorf("a small request beside the slow one: %d, want 200", code)
	}
	big := `{"domain":"mongo_cps","descriptors":[{"entries":[{"key":"database","value":"` + strings.Repeat("u", 30<<10) + `"}]}]}`
	if code := postStatus(t, h.http.URL, big); code != http.StatusServiceUnavailable {
		t.Errorf("30 KiB beside 40 KiB held, with 64 KiB in all: %d, want 503", code)
	}
	slow.Close()
	time.Sleep(200 * time.Millisecond) // the server sees the close
	if code := postStatus(t, h.http.URL, big); code != http.StatusOK {
		t.Errorf("30 KiB once the slow client left: %d, want 200", code)
	}
}

func postStatus(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	return resp.StatusCode
}
