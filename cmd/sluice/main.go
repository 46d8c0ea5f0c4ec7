// Command sluice is the one binary of Sluice: a rate limit service, a
// rate limiting reverse proxy, a config checker, a schema migrator and a
// simulator, as the commands serve, proxy, check, migrate, simulate, help
// and version.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; when
// empty, the module version from the build info is used.
var version = ""

func main() {
	os.Exit(run(commandLine(os.Args), os.Stdout, os.Stderr))
}

// ratelimitName is envoyproxy/ratelimit's binary name: Envoy Gateway's
// Deployment and envoyproxy/ratelimit's compose files run /bin/ratelimit
// with no argument, configured by environment variables alone.
const ratelimitName = "ratelimit"

// commandLine returns the command line run is given for argv (os.Args):
// argv without the program's name, except that invoked under
// envoyproxy/ratelimit's name (the image's /bin/ratelimit link) the
// program is `sluice serve`, with any arguments after it.
func commandLine(argv []string) []string {
	if len(argv) == 0 {
		return nil
	}
	if filepath.Base(argv[0]) == ratelimitName {
		return append([]string{"serve"}, argv[1:]...)
	}
	return argv[1:]
}

// run executes the command line args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		mainUsage(stdout)
		return 0
	}
	switch args[0] {
	case "help":
		return commandHelp(args[1:], stdout, stderr)
	case "-h", "-help", "--help":
		mainUsage(stdout)
		return 0
	case "check":
		return check(args[1:], stdout, stderr)
	case "serve":
		return untilStopped(runServe, args[1:], stdout, stderr)
	case "proxy":
		return untilStopped(runProxy, args[1:], stdout, stderr)
	case "simulate":
		return simulate(args[1:], stdout, stderr)
	case "migrate":
		return untilStopped(runMigrate, args[1:], stdout, stderr)
	case "admin":
		return runAdmin(context.Background(), args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "sluice", buildVersion())
		return 0
	default:
		fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", args[0])
		mainUsage(stderr)
		return 2
	}
}

// untilStopped runs cmd with a context that SIGINT or SIGTERM cancels:
// serve, proxy and migrate end (gracefully, each its own way) on either.
func untilStopped(cmd func(context.Context, []string, io.Writer, io.Writer) int, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cmd(ctx, args, stdout, stderr)
}

// mainUsage prints the general help: the commands.
func mainUsage(w io.Writer) {
	fmt.Fprint(w, `Sluice is a rate limiter: a Go library, a rate limit service and a proxy.

Usage:
  sluice <command> [arguments]

Commands:
  admin     call a running serve's admin API: peek, reset, plans,
            overrides, usage, the ledger (sluice admin -h)
  check     validate a rate limit config and print its descriptor tree
            (sluice check PATH; a file or a directory of *.yaml files)
  help      show this help; sluice help COMMAND shows a command's flags
            and examples, as sluice COMMAND -h does
  migrate   bring a PostgreSQL store's schema up to date (sluice migrate
            postgres://…; serve applies it on start too)
  proxy     run a rate limiting reverse proxy in front of a service, like
            NGINX limit_req/limit_conn with honest headers
            (sluice proxy -upstream URL -config FILE; -check validates
            the file; sluice proxy -h)
  serve     run the rate limit service: Envoy's RateLimitService v3 over
            gRPC and POST /json over HTTP (sluice serve -h); with no
            flags, on the memory store with a built-in example config
  simulate  run traffic patterns through every algorithm on a simulated
            clock and compare them (sluice simulate -h; sluice simulate
            accuracy for the sliding window's error against the exact log)
  version   print the version
`)
}

// buildVersion returns the version set at link time, else the main module's
// version from the build info, else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
