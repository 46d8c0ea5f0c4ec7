package main

import (
	"path/filepath"
	"testing"
)

// A -store that names no kind of store is a bad command line (exit 2)
// for serve, proxy and check alike, and the message names every kind
// and its schemes, not only Redis's: the operator learns what -store
// takes without reading the docs.
func TestUnknownStoreNamesEveryKindAndExits2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sw.yaml")
	writeFile(t, path, cfgSlidingWindow)
	want := "want memory, Redis (redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel://, rediss+sentinel://) or PostgreSQL (postgres://, postgresql://)"
	for _, args := range [][]string{
		{"serve", "-store", "foo://x", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"},
		{"serve", "-store", "localhost:6379", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"},
		{"proxy", "-store", "foo://x", "-upstream", "http://127.0.0.1:1", "-listen", "127.0.0.1:0"},
		{"check", "-store", "foo://u:secret@x", path},
	} {
		code, _ := runCase{args, 2, "", want}.check(t)
		if code == 2 {
			runCase{args, 2, "", "-store " + args[2][:3]}.check(t)
		}
	}
}

// The proxy decides on memory or Redis: a PostgreSQL -store is refused
// by name at start (exit 2), from the same table serve opens it with.
func TestProxyRefusesPostgreSQLByName(t *testing.T) {
	runCase{[]string{"proxy", "-store", "postgres://127.0.0.1:1/db", "-upstream", "http://127.0.0.1:1", "-listen", "127.0.0.1:0"},
		2, "", "PostgreSQL"}.check(t)
}
