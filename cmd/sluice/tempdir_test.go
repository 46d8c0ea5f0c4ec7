package main

import (
	"os"
	"testing"
)

// shortTempDir returns a new directory removed when the test ends, with a
// path short enough for a Unix socket (at most 104 bytes on some systems;
// t.TempDir's, which holds the test's name, may be longer).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
