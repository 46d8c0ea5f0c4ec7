// Package redistest starts real redis-server processes for tests: a single
// node (StartServer, or Single shared by a package's tests) and a Redis
// Cluster built with `redis-cli --cluster create` (StartCluster, or
// SharedCluster). Every server listens on a free loopback port (127.0.0.1),
// keeps no data on disk (no RDB snapshots, no AOF) and lives in a temporary
// directory that also holds its log, which is printed when a start fails.
// With Redis 7 or later, DEBUG is enabled for loopback clients, so a test of
// timeouts can use DEBUG SLEEP. Server.Do and Server.Exec send a command
// over a connection of their own (no redis-cli needed) and return the reply
// as text.
//
// A server is stopped by t.Cleanup, or, for the shared ones, when the test
// binary ends through Main (or Wrap). A server runs in its own process group,
// so stopping it also stops any child it forked; on Linux it is also killed by
// the kernel if the test binary dies (an interrupted or timed-out run).
//
// When redis-server (or, for a cluster, redis-cli) is not on PATH, a test that
// asks for a server is skipped with a message saying what to install — unless
// SLUICE_REQUIRE_REDIS=1, as CI sets it, when the test fails instead. The
// environment variables SLUICE_REDIS_SERVER and SLUICE_REDIS_CLI name the
// binaries to use in place of the ones found on PATH.
//
// A package that uses Single or SharedCluster runs its tests through Main:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// or, with goleak, through Wrap:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Wrap(m)) }
//
// The package starts no goroutine that outlives a call, so goleak sees none.
// A package whose tests close rueidis clients adds IgnoreRueidis:
//
//	goleak.VerifyTestMain(redistest.Wrap(m), redistest.IgnoreRueidis()...)
//
// Tests that share a server use keys of their own (a prefix of the test's
// name, say) and leave the server running; tests that kill, restart or
// reconfigure a server start their own.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The environment variables the package reads.
const (
	// RequireEnv, set to 1, turns a skip for a missing Redis into a failure.
	RequireEnv = "SLUICE_REQUIRE_REDIS"
	// ServerEnv names the redis-server binary, in place of the one on PATH.
	ServerEnv = "SLUICE_REDIS_SERVER"
	// CLIEnv names the redis-cli binary, in place of the one on PATH.
	CLIEnv = "SLUICE_REDIS_CLI"
)

// installHint says how to get Redis; every skip and failure for a missing
// binary carries it.
const installHint = "install Debian's packages with `apt-get install redis-server redis-tools` " +
	"(`make test` installs them when run as root)"

// tools are the binaries the package runs, looked up once per test binary.
type tools struct {
	server, cli       string
	serverErr, cliErr error
	// major is redis-server's major version, 0 if unknown.
	major int
}

var lookTools = sync.OnceValue(func() tools {
	var tl tools
	tl.server, tl.serverErr = lookBinary(ServerEnv, "redis-server")
	tl.cli, tl.cliErr = lookBinary(CLIEnv, "redis-cli")
	if tl.serverErr == nil {
		tl.serverErr = supported()
	}
	if tl.serverErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, tl.server, "--version")
		cmd.SysProcAttr = sysProcAttr()
		cmd.Cancel = func() error { killGroup(cmd.Process); return nil }
		cmd.WaitDelay = time.Second
		if out, err := cmd.Output(); err == nil {
			if m := regexp.MustCompile(`\bv=(\d+)\.`).FindSubmatch(out); m != nil {
				tl.major, _ = strconv.Atoi(string(m[1]))
			}
		}
	}
	return tl
})

// lookBinary finds name through the environment variable env if it is set,
// else on PATH.
func lookBinary(env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return path, nil
	}
	return exec.LookPath(name)
}

// required reports whether a missing Redis is a failure rather than a skip.
func required() bool {
	v := os.Getenv(RequireEnv)
	return v != "" && v != "0"
}

// need skips or fails t when redis-server (and, if cli, redis-cli) is
// missing, and returns the tools otherwise.
func need(t testing.TB, cli bool) tools {
	t.Helper()
	tl := lookTools()
	var missing []string
	if tl.serverErr != nil {
		missing = append(missing, fmt.Sprintf("redis-server (%v)", tl.serverErr))
	}
	if cli && tl.cliErr != nil {
		missing = append(missing, fmt.Sprintf("redis-cli (%v)", tl.cliErr))
	}
	if len(missing) == 0 {
		return tl
	}
	what := strings.Join(missing, " and ")
	if required() {
		t.Fatalf("REDIS MISSING: this test needs %s; %s. %s=1 is set, so this is a failure, not a skip.",
			what, installHint, RequireEnv)
	}
	t.Skipf("REDIS MISSING, TEST SKIPPED: this test needs %s; %s. Set %s=1 to make this a failure.",
		what, installHint, RequireEnv)
	return tl
}

// shared holds the servers Single and SharedCluster hand out.
var shared struct {
	// wrapped is set once Wrap's Run has started, so that the shared servers
	// are known to be stopped at the end.
	wrapped atomic.Bool

	single  lazy[*Server]
	cluster lazy[*Cluster]

	dirsMu sync.Mutex
	dirs   []string
}

// lazy is a shared server or cluster, started on first use. A failed start
// is remembered, so that every later caller fails at once instead of trying
// again.
type lazy[T any] struct {
	mu      sync.Mutex
	started bool
	v       T
	err     error
}

// get returns the value, started by start on the first call.
func (l *lazy[T]) get(start func() (T, error)) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.v, l.err = start()
		l.started = true
	}
	return l.v, l.err
}

// stop stops the value with stop, if it started, and makes every later get
// fail.
func (l *lazy[T]) stop(stop func(T)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started && l.err == nil {
		stop(l.v)
	}
	var zero T
	l.v, l.err, l.started = zero, errStopped, true
}

// Main runs the tests of m, stops the shared servers of Single and
// SharedCluster and exits with the tests' exit code. It is the whole body of
// a TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
func Main(m *testing.M) {
	os.Exit(Wrap(m).Run())
}

// Wrap returns m with a Run method that runs the tests and then stops the
// shared servers of Single and SharedCluster, for a TestMain that does more
// than Main:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Wrap(m)) }
func Wrap(m interface{ Run() int }) interface{ Run() int } {
	return wrapped{m}
}

type wrapped struct{ m interface{ Run() int } }

// Run runs the tests, then stops the shared servers.
func (w wrapped) Run() int {
	shared.wrapped.Store(true)
	defer stopShared()
	return w.m.Run()
}

// IgnoreRueidis returns the goleak options that let a test binary's rueidis
// clients end their lives as rueidis ends them: after a failed cluster
// topology refresh, a cluster client sleeps for a few seconds in a goroutine
// that Close does not wake, and retries once more after up to a second, even
// past Close. Both goroutines end by themselves.
func IgnoreRueidis() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	}
}

// stopShared stops the shared servers and removes their directories.
func stopShared() {
	shared.single.stop((*Server).stop)
	shared.cluster.stop((*Cluster).stop)

	shared.dirsMu.Lock()
	for _, d := range shared.dirs {
		os.RemoveAll(d)
	}
	shared.dirs = nil
	shared.dirsMu.Unlock()
}

var errStopped = fmt.Errorf("redistest: the shared servers were stopped at the end of the tests")

// sharedDir makes a directory for a shared server, removed by stopShared.
func sharedDir() (string, error) {
	d, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return "", fmt.Errorf("redistest: %w", err)
	}
	shared.dirsMu.Lock()
	shared.dirs = append(shared.dirs, d)
	shared.dirsMu.Unlock()
	return d, nil
}

// needWrap fails t unless the test binary runs through Main or Wrap, which
// stop the shared servers.
func needWrap(t testing.TB, name string) {
	t.Helper()
	if !shared.wrapped.Load() {
		t.Fatalf("redistest: %s needs the package's TestMain to run the tests through redistest.Main "+
			"(func TestMain(m *testing.M) { redistest.Main(m) }) or redistest.Wrap, "+
			"which stop the shared servers at the end", name)
	}
}

// Single returns a single-node server shared by all the tests of the test
// binary, started on first use. Tests that share it must use keys of their
// own and must not stop, restart or reconfigure it: fault tests start their
// own with StartServer. It needs the package's TestMain to call Main (or
// Wrap). Call it from the test's goroutine: it may skip or fail the test.
// It is safe for concurrent use.
func Single(t testing.TB) *Server {
	t.Helper()
	tl := need(t, false)
	needWrap(t, "Single")
	s, err := shared.single.get(func() (*Server, error) {
		dir, err := sharedDir()
		if err != nil {
			return nil, err
		}
		s, err := newServer(tl, dir, false, nil)
		if err != nil {
			return nil, err
		}
		s.shared = true
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SharedCluster returns a cluster of 3 masters and no replicas shared by all
// the tests of the test binary, started on first use; see Single for the
// rules of sharing. Tests that kill nodes start their own with StartCluster.
// It is safe for concurrent use.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	tl := need(t, true)
	needWrap(t, "SharedCluster")
	c, err := shared.cluster.get(func() (*Cluster, error) {
		dirs := make([]string, 3)
		for i := range dirs {
			var err error
			if dirs[i], err = sharedDir(); err != nil {
				return nil, err
			}
		}
		c, err := newCluster(tl, dirs, 3, 0)
		if err != nil {
			return nil, err
		}
		for _, n := range c.Nodes {
			n.shared = true
		}
		return c, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
