package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/config"
)

// check runs `sluice check PATH`: it loads the config at PATH (a file or a
// directory of *.yaml files) and prints the compiled descriptor trees. It
// returns 0 when the config is valid, 1 with the error (file:line:col first)
// on stderr when it is not, and 2 for a bad command line.
func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice check PATH

Check validates a rate limit config in envoyproxy/ratelimit's YAML format
(with Sluice's extensions) and prints the compiled descriptor tree. PATH is a
file, or a directory whose *.yaml and *.yml files hold one domain each. The
exit status is 0 for a valid config and 1 for an invalid one.
`)
	}
	if err := fs.Parse(args); err != nil {
		return exitFlag(err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cfg.Dump(stdout)
	return 0
}
