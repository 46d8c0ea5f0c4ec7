package daemon

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// At the cap, a new connection takes the place of the one idle the
// longest, which is closed: a client that leaves a keep-alive connection
// idle cannot hold the listener until its idle timeout (here: none).
func TestCapConnsIdleConnectionGivesWayToANewOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	capped, connState := CapConns(ln, 1)
	hs := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		ConnState: connState,
	}
	go hs.Serve(capped)
	defer hs.Close()
	url := "http://" + ln.Addr().String()
	for _, who := range []string{"the first client", "the second client"} {
		c := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second} // a connection each, kept alive
		defer c.CloseIdleConnections()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("%s: %v (the idle connection did not give way)", who, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// A negative cap is no cap: the listener is returned as it is.
func TestCapConnsNegativeIsNoCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got, hook := CapConns(ln, -1); got != ln || hook != nil {
		t.Errorf("CapConns(ln, -1) = %T, hook %v; want ln itself and no hook", got, hook != nil)
	}
}
