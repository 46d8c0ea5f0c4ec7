package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve's -http-max-conns is the proxy's -max-conns: at the cap, the
// connection idle longest between keep-alive requests gives its place to a
// new client, which does not wait for -http-idle-timeout.
func TestServeMaxConnsIdleKeepAliveGivesWay(t *testing.T) {
	url := launch(t, "-http-max-conns", "1", "-http-idle-timeout", "1h").url
	host := strings.TrimPrefix(url, "http://")
	first, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	fmt.Fprintf(first, "GET /healthcheck HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(first), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v %v", resp, err)
	}
	resp.Body.Close() // the first connection is now idle, kept alive for an hour

	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Get(url + "/healthcheck")
	if err != nil {
		t.Fatalf("a new client waited behind an idle keep-alive connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("second: %d, want 200", resp.StatusCode)
	}
	first.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := first.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the idle first connection is still open (%d, %v), want it closed for the second", n, err)
	}
}
