package main

import (
	"testing"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/daemontest"
	"github.com/sluicehq/sluice/internal/testpki"
)

// tlsFiles writes a server pair and a client CA (if not nil) into dir and
// returns the options that name them.
func tlsFiles(t *testing.T, dir string, server testpki.Leaf, clientCA *testpki.CA) daemon.GRPCTLSOptions {
	t.Helper()
	o := daemon.GRPCTLSOptions{Use: true}
	o.Cert, o.Key, o.ClientCA = daemontest.TLSFiles(t, dir, server, clientCA)
	return o
}

// Shorter names for the daemontest helpers these tests call most.
var (
	dial         = daemontest.Dial
	checkHealth  = daemontest.CheckHealth
	eventually   = daemontest.Eventually
	writeFile    = daemontest.WriteFile
	writeAtomic  = daemontest.WriteAtomic
	shortTempDir = daemontest.ShortTempDir
	quietLogger  = daemontest.QuietLogger
)
