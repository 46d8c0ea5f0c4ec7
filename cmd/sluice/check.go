package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/stores"
)

// checkUsage is check's -h.
var checkUsage = usage{
	synopsis: "sluice check [-store URL] [-trusted-proxies LIST] PATH",
	about: `Check validates a rate limit config in envoyproxy/ratelimit's YAML format
(with Sluice's extensions) and prints the compiled descriptor tree. PATH is a
file, or a directory whose *.yaml and *.yml files hold one domain each. With
a -store (by default REDIS_URL's, as sluice serve), a rule that store cannot
serve is an error too (a billable rule on memory or Redis, say); without one,
the config is checked for no particular store. It runs the checks sluice
serve's start-up runs on the config: the files (regular, within the total
size), the rules for the store, and a forward_auth entry from client_ip
with no proxy trusted (by the block or by -trusted-proxies, as serve's).
What only start-up checks: serve's other flags and variables (listeners,
TLS and admin files, -headers, -rlqs-*), and the store itself (no
connection is made). The exit status is 0 for a valid config, 1 for an
invalid one and 2 for a bad command line.`,
	examples: []string{"sluice check /etc/ratelimit/config", "sluice check -store redis://redis:6379 rl.yaml"},
}

// check runs `sluice check PATH`: it loads the config at PATH (a file or a
// directory of *.yaml files) and prints the compiled descriptor trees. It
// returns 0 when the config is valid, 1 with the error (file:line:col first)
// on stderr when it is not, and 2 for a bad command line.
func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice check", flag.ContinueOnError)
	store := fs.String("store", stores.RedisURLFromEnv("REDIS_"), "the store the config is for: memory, a Redis URL or a PostgreSQL URL (only its scheme matters: no connection is made); rules that store cannot serve are errors; none (no REDIS_URL either): checked for no particular store")
	trustedProxies := fs.String("trusted-proxies", "", "as sluice serve's: the reverse proxies that call /auth, added to the config's forward_auth trusted_proxies; none: an entry from client_ip needs the block's")
	if code, done := parseCommandLine(fs, args, stdout, stderr, checkUsage, 1); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "sluice check: give the config's PATH. Run 'sluice check -h' for the usage.")
		return 2
	}
	if _, err := stores.Of(*store); err != nil {
		fmt.Fprintln(stderr, "sluice check:", err)
		return 2
	}
	trusted, err := clientip.ParsePrefixes(envflag.List(*trustedProxies)...)
	if err != nil {
		fmt.Fprintln(stderr, "sluice check: -trusted-proxies:", err)
		return 2
	}
	// As serve checks them first: regular files, within the total size.
	_, err = daemon.CheckConfigFiles(context.Background(), fs.Arg(0))
	var cfg *config.Config
	if err == nil {
		cfg, err = config.Load(fs.Arg(0))
	}
	if err == nil {
		err = checkForwardAuth(cfg, trusted) // as serve's start-up
	}
	if err == nil && *store != "" {
		// No -store (and no REDIS_URL): the config is checked for no
		// particular store, so what only some stores serve (a billable
		// rule: PostgreSQL) is not refused.
		err = checkRulesForStore(cfg, stores.Validator(*store))
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cfg.Dump(stdout)
	return 0
}
