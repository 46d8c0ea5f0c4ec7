package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/internal/redact"
)

// usage is what a command's -h prints before its flags.
type usage struct {
	// synopsis is the usage line(s), "sluice serve [flags]".
	synopsis string
	// about says what the command does, a paragraph or two.
	about string
	// examples are command lines to copy, one per line.
	examples []string
}

// write prints u and fs's flags on w.
func (u usage) write(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", u.synopsis, strings.TrimSpace(u.about))
	if len(u.examples) > 0 {
		fmt.Fprint(w, "\nExample:\n")
		for _, e := range u.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		// A default from the environment (REDIS_URL's -store) may hold
		// a password: the help shows it masked.
		f.DefValue = redact.URL(f.DefValue)
	})
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}

// parseCommandLine parses a command's args with fs, as every command of
// sluice does (the command's name is fs.Name()):
//
//   - -h, -help or --help prints u and the flags on stdout: done, exit 0;
//   - a flag it does not know, or a bad value, is the flag package's error
//     and a pointer to -h on stderr: done, exit 2;
//   - more than maxArgs positional arguments is an error naming the first
//     extra one (flags after a positional argument would otherwise be
//     ignored in silence): done, exit 2.
//
// Otherwise done is false and the command goes on.
func parseCommandLine(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, u usage, maxArgs int) (code int, done bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {} // -h is handled below, errors point to it
	name := fs.Name()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			u.write(stdout, fs)
			return 0, true
		}
		fmt.Fprintf(stderr, "Run '%s -h' for the flags.\n", name)
		return 2, true
	}
	if fs.NArg() > maxArgs {
		extra := fs.Arg(maxArgs)
		hint := ""
		if strings.HasPrefix(fs.Arg(min(maxArgs+1, fs.NArg()-1)), "-") || fs.NArg() > maxArgs+1 {
			hint = " (flags go before it; those after it are not read)"
		}
		fmt.Fprintf(stderr, "%s: unexpected argument %q%s. Run '%s -h' for the usage.\n", name, extra, hint, name)
		return 2, true
	}
	return 0, false
}

// commandHelp runs `sluice help CMD`: the command's own -h.
func commandHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		mainUsage(stdout)
		return 0
	}
	switch args[0] {
	case "serve", "proxy", "check", "simulate", "migrate", "admin":
		return run([]string{args[0], "-h"}, stdout, stderr)
	case "help", "version":
		mainUsage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "sluice help: unknown command %q\n\n", args[0])
	mainUsage(stderr)
	return 2
}

// proxyUsage is proxy's -h (its flags are proxy.go's).
var proxyUsage = usage{
	synopsis: "sluice proxy [flags]",
	about: `Proxy runs a rate limiting reverse proxy in front of a service, like NGINX's
limit_req and limit_conn, with honest RateLimit headers. Its routes and
limits are a YAML file (docs/proxy.md); -upstream alone proxies everything
without limits. SIGHUP reloads the file; SIGTERM drains and stops.`,
	examples: []string{
		"sluice proxy -upstream http://127.0.0.1:8000 -config proxy.yaml",
		"sluice proxy -config proxy.yaml -check",
	},
}
