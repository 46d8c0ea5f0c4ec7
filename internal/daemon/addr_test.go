package daemon

import "testing"

// A port alone, or :port, puts the admin listener on loopback.
func TestAdminAddrDefaultsToLoopback(t *testing.T) {
	for in, want := range map[string]string{"9901": "127.0.0.1:9901", ":9901": "127.0.0.1:9901", "0.0.0.0:9901": "0.0.0.0:9901", "[::1]:9901": "[::1]:9901"} {
		if got := AdminAddr(in); got != want {
			t.Errorf("AdminAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
