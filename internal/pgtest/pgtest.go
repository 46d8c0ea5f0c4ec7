//go:build unix

// Package pgtest starts real PostgreSQL servers for tests: one shared by a
// test package (Shared, started on first use and stopped when the test binary
// ends through Main or Wrap), a fresh schema of it per test (Schema), and
// dedicated servers that a test may stop and start again (StartServer).
//
// A server is initialised with initdb into a temporary directory, listens on
// a free loopback port (127.0.0.1) with its Unix socket in that directory,
// trusts every local connection (user postgres, no password) and runs with
// fsync off: a crash of the server process loses nothing that was committed
// (synchronous_commit stays on), only a crash of the machine would. Its log
// is printed when a start fails.
//
// initdb and postgres refuse to run as root. When the tests run as root, the
// package runs them as the operating system user postgres (which Debian's
// package creates), and gives that user the server's directory.
//
// The binaries are found in the directory SLUICE_POSTGRES_BIN names, else in
// `pg_config --bindir`, else in the newest /usr/lib/postgresql/<version>/bin
// (Debian's layout, where they are not on PATH). When none holds initdb and
// postgres, a test that asks for a server is skipped with a message saying
// what to install — unless SLUICE_REQUIRE_POSTGRES=1, as CI sets it, when
// the test fails instead.
//
// A package that uses Shared or Schema runs its tests through Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The environment variables the package reads.
const (
	// RequireEnv, set to 1, turns a skip for a missing PostgreSQL into a
	// failure.
	RequireEnv = "SLUICE_REQUIRE_POSTGRES"
	// BinDirEnv names the directory that holds initdb and postgres.
	BinDirEnv = "SLUICE_POSTGRES_BIN"
)

// installHint says how to get PostgreSQL; every skip and failure for a
// missing binary carries it.
const installHint = "install Debian's package with `apt-get install postgresql` " +
	"(`make test` installs it when run as root)"

// tools are the binaries and the user the servers run as, found once per
// test binary.
type tools struct {
	initdb, postgres string
	// cred is the user to run them as when the tests run as root; nil
	// otherwise.
	cred *syscall.Credential
	err  error
}

var lookTools = sync.OnceValue(func() tools {
	var tl tools
	dir, err := binDir()
	if err != nil {
		tl.err = err
		return tl
	}
	tl.initdb, tl.postgres = filepath.Join(dir, "initdb"), filepath.Join(dir, "postgres")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tl.err = fmt.Errorf("running as root, and initdb refuses root, but there is no user postgres to run it as: %w", err)
			return tl
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		tl.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return tl
})

// binDir finds the directory of initdb and postgres.
func binDir() (string, error) {
	has := func(d string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv(BinDirEnv); d != "" {
		if !has(d) {
			return "", fmt.Errorf("%s=%s holds no initdb and postgres", BinDirEnv, d)
		}
		return d, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); has(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("initdb and postgres not found (not in %s, `pg_config --bindir` or /usr/lib/postgresql/*/bin)", BinDirEnv)
}

// version is the major version in a path /usr/lib/postgresql/<v>/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// required reports whether a missing PostgreSQL is a failure rather than a
// skip.
func required() bool {
	v := os.Getenv(RequireEnv)
	return v != "" && v != "0"
}

// need skips or fails t when PostgreSQL is missing, and returns the tools
// otherwise.
func need(t testing.TB) tools {
	t.Helper()
	tl := lookTools()
	if tl.err == nil {
		return tl
	}
	if required() {
		t.Fatalf("POSTGRESQL MISSING: this test needs a PostgreSQL server (%v); %s. %s=1 is set, so this is a failure, not a skip.",
			tl.err, installHint, RequireEnv)
	}
	t.Skipf("POSTGRESQL MISSING, TEST SKIPPED: this test needs a PostgreSQL server (%v); %s. Set %s=1 to make this a failure.",
		tl.err, installHint, RequireEnv)
	return tl
}

// shared is the server Shared hands out.
var shared struct {
	wrapped atomic.Bool

	mu      sync.Mutex
	started bool
	s       *Server
	err     error

	schemas atomic.Int64
}

// Main runs the tests of m, stops the shared server and exits with the
// tests' exit code. It is the whole body of a TestMain.
func Main(m *testing.M) { os.Exit(Wrap(m).Run()) }

// Wrap returns m with a Run method that runs the tests and then stops the
// shared server, for a TestMain that does more than Main.
func Wrap(m interface{ Run() int }) interface{ Run() int } { return wrapped{m} }

type wrapped struct{ m interface{ Run() int } }

// Run runs the tests, then stops the shared server.
func (w wrapped) Run() int {
	shared.wrapped.Store(true)
	defer stopShared()
	return w.m.Run()
}

func stopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.s != nil {
		shared.s.Close()
	}
	shared.s, shared.started, shared.err = nil, true, errStopped
}

var errStopped = fmt.Errorf("pgtest: the shared server was stopped at the end of the tests")

// Shared returns a server shared by all the tests of the test binary,
// started on first use. Tests that share it work in schemas of their own
// (Schema) and must not stop it: fault tests start their own with
// StartServer. It needs the package's TestMain to call Main (or Wrap). Call
// it from the test's goroutine: it may skip or fail the test.
func Shared(t testing.TB) *Server {
	t.Helper()
	tl := need(t)
	if !shared.wrapped.Load() {
		t.Fatalf("pgtest: Shared needs the package's TestMain to run the tests through pgtest.Main " +
			"(func TestMain(m *testing.M) { pgtest.Main(m) }) or pgtest.Wrap, which stop the server at the end")
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.s, shared.err = newServer(tl)
		shared.started = true
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.s
}

// Schema creates a fresh schema on the shared server and returns a
// connection URL whose search_path is that schema alone, so that what a
// test creates without a schema name lands there. The schema is dropped
// when the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	return Shared(t).Schema(t)
}

// Schema creates a fresh schema on s; see the package function Schema.
func (s *Server) Schema(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), shared.schemas.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Logf("pgtest: dropping schema %s: %v", name, err)
		}
	})
	return s.URL() + "&search_path=" + name
}

// Connect returns a connection to url, made within 10 s and closed when
// the test ends; it fails the test if the server does not answer.
func Connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// exec runs one statement on s's database postgres over a connection of its
// own.
func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", s.Addr(), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}
