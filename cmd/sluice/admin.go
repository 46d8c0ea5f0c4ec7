package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
)

// adminUsage is admin's -h.
var adminUsage = usage{
	synopsis: "sluice admin [flags] OPERATION [ARGUMENTS]",
	about: `Admin calls the admin API of a running sluice serve or proxy (its
-admin-addr) and prints the answer: JSON, CSV for a CSV ledger export, or "ok" for a change.
The default -url is the admin listener both serve and proxy are shown
with in the docs (serve -admin-addr 9901; the proxy's default); the
error of a call says which URL was tried. The token is read from
-token-file, else ` + daemon.AdminTokenEnv + `; with -cert and -key the call
authenticates by client certificate (mTLS). Exit status 1 when the
API refuses or fails the call (its status and message on stderr), 2 for a
usage error. Operations:

  peek -domain D -descriptor K=V[,K2=V2]
                                  the state of each key the running config
                                  counts the descriptor under, spending
                                  nothing (on sluice proxy: -domain LIMIT
                                  -descriptor key=VALUE, VALUE what the
                                  limit's key is, such as a client IP)
  reset -domain D -descriptor K=V[,K2=V2]
                                  give back all those keys spent
  peek KEY LIMIT                  low level: a store key's state under LIMIT
  reset KEY LIMIT                 low level: give back what KEY spent,
                                  counted under LIMIT (at most its capacity)
  login                           print a one-time link that opens the live
                                  page in a browser (single use, 5 minutes)
  set-plan PLAN LIMITS            create or replace a plan: {"NAME": LIMIT, ...}
  assign TENANT PLAN              put a tenant on a plan ("" takes it off)
  override TENANT NAME LIMIT [EXPIRES]
                                  a tenant's own limit of NAME (domain.key...),
                                  until EXPIRES (RFC 3339, or a duration from now)
  clear-override TENANT NAME      delete a tenant's override
  usage KEY                       a key's usage by period, from the ledger
  ledger FROM TO [csv|json]       every period starting in [FROM, TO) (RFC 3339)

LIMIT is JSON: {"rate": 10000, "calendar": {"unit": "month", "time_zone":
"Europe/Berlin", "anchor_day": 15}} or {"rate": 100, "period": "1m"}
(algorithm: fixed_window unless "algorithm" says otherwise).`,
	examples: []string{
		"sluice admin peek -domain web -descriptor user=alice",
		"sluice admin reset -domain api -descriptor tenant=acme,path=/upload",
		`sluice admin set-plan pro '{"api.tenant": {"rate": 10000, "calendar": {"unit": "month"}}}'`,
		"sluice admin assign acme pro",
		`sluice admin override acme api.tenant '{"rate": 20000, "calendar": {"unit": "month"}}' 72h`,
		"sluice admin -url https://sluice:9901 -ca ca.pem ledger 2026-01-01T00:00:00Z 2026-02-01T00:00:00Z csv",
	},
}

// runAdmin runs `sluice admin`.
func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice admin", flag.ContinueOnError)
	var c adminclient.Client
	fs.StringVar(&c.URL, "url", envflag.String(adminclient.URLEnv, adminclient.DefaultURL), "the admin API's base URL (serve's or proxy's -admin-addr; a port or host:port means http://)")
	fs.StringVar(&c.TokenFile, "token-file", "", "file holding the bearer token (else "+daemon.AdminTokenEnv+")")
	fs.StringVar(&c.CA, "ca", "", "CA bundle (PEM) that the API's certificate must chain to; default: the system's")
	fs.StringVar(&c.Cert, "cert", "", "client certificate (PEM) for mTLS, with -key")
	fs.StringVar(&c.Key, "key", "", "client key (PEM) for mTLS")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Second, "give up on a call after this long (a ledger export: 10 times this)")
	if code, done := parseCommandLine(fs, args, stdout, stderr, adminUsage, 6); done {
		return code
	}
	fail := daemon.ExitWith(stderr, "sluice admin:")
	if fs.NArg() == 0 {
		return fail(2, "give an operation. Run 'sluice admin -h' for the list.")
	}
	c.URLSource = "-url"
	switch {
	case !envflag.IsSet(fs, "url") && os.Getenv(adminclient.URLEnv) != "":
		c.URLSource = adminclient.URLEnv
	case !envflag.IsSet(fs, "url"):
		c.URLSource = "the default"
	}
	call, err := adminclient.Operation(fs.Args(), time.Now())
	if err != nil {
		return fail(2, err)
	}
	if err := c.Do(ctx, call, stdout); err != nil {
		if errors.As(err, new(adminclient.UsageError)) {
			return fail(2, err)
		}
		return fail(1, err)
	}
	return 0
}
