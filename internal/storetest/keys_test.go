package storetest

import "testing"

// TestKeyOfIsNewEachCall: a test run again in the same process (go test
// -count=2) has the same name and the same run, and must still meet none
// of the keys its first run left on a store that outlives it, such as a
// shared redis-server.
func TestKeyOfIsNewEachCall(t *testing.T) {
	if a, b := keyOf(t), keyOf(t); a == b {
		t.Fatalf("keyOf returned %q twice for one test", a)
	}
}
