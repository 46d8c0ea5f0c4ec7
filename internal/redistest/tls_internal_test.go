package redistest

import (
	"net"
	"strconv"
	"testing"
)

// A TLS port taken by another process between the pick and the server's
// bind is given up for another, as the main port is: the free-port loop
// picks both.
func TestStartTLSServerRetriesTakenTLSPort(t *testing.T) {
	// Not parallel: it replaces pickPort for the whole package.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().(*net.TCPAddr).Port
	real := pickPort
	t.Cleanup(func() { pickPort = real })
	calls := 0
	pickPort = func(cluster bool) (int, error) {
		if calls++; calls == 1 {
			return taken, nil // the first pick loses the race
		}
		return real(cluster)
	}
	s := StartTLSServer(t)
	if s.TLSAddr == net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)) || s.Port == taken {
		t.Fatalf("server on %s (TLS %s) uses the taken port %d", s.Addr, s.TLSAddr, taken)
	}
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}
}
