package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/progress"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/pgstore"
)

// migrateUsage is migrate's -h.
var migrateUsage = usage{
	synopsis: "sluice migrate [flags] [URL]",
	about: `Migrate brings the schema of a PostgreSQL store up to date: it applies the
migrations embedded in this binary that the database has not applied yet
(all in one transaction, under a lock, so two at once are safe) and prints
each one it applied, or that the schema was up to date. Running it twice
changes nothing the second time. sluice serve -store postgres://… applies
them on start too, unless -migrate=false. On a terminal, stderr shows a
progress bar after half a second. Exit status 1 when the database
cannot be reached or a migration fails, 2 for a usage error.`,
	examples: []string{
		"sluice migrate postgres://sluice@db:5432/sluice",
		"sluice migrate -store postgres://sluice@db:5432/sluice -timeout 1m",
		"sluice migrate prune -older-than 90d postgres://sluice@db:5432/sluice",
	},
}

// pruneUsage is `migrate prune`'s -h.
var pruneUsage = usage{
	synopsis: "sluice migrate prune -older-than D [flags] [URL]",
	about: `Prune deletes the usage ledger's periods that ended more than D ago (the
keys' counts, and the per-group key counts of the cap on distinct keys),
10,000 rows per statement, and prints how many rows it deleted. A period
still open is never deleted. D is a Go duration (2160h) or a number of days
(90d). It also deletes, whatever their age, the periods of rules that are
not billable (no billable: true) that ended more than a minute ago, as a
running serve does every minute. Export what the bills need first (sluice
admin ledger). Run it periodically, from cron or a Kubernetes CronJob: rows
of billable periods that ended stay until it runs. On a terminal, stderr
shows a progress bar after half a second, moved by each batch. Exit status 1 when the database cannot be reached or a
statement fails (what was deleted until then stays deleted), 2 for a usage
error.`,
	examples: []string{
		"sluice migrate prune -older-than 90d postgres://sluice@db:5432/sluice",
	},
}

// runPrune runs `sluice migrate prune`.
func runPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice migrate prune", flag.ContinueOnError)
	store := fs.String("store", "", "the PostgreSQL database: a postgres:// or postgresql:// URL (or give it as the argument)")
	olderThan := fs.String("older-than", "", "delete the periods that ended more than this long ago: a Go duration (2160h) or days (90d); required")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	url, fail, code, done := parseDatabaseCommand(fs, store, args, stdout, stderr, pruneUsage, "keeps a ledger")
	if done {
		return code
	}
	if *olderThan == "" {
		return fail(2, "-older-than is required: how long after its end a period is kept (90d, 2160h)")
	}
	age, err := envflag.ParseAge(*olderThan)
	if err != nil {
		return fail(2, "-older-than "+err.Error())
	}
	if *timeout <= 0 {
		return fail(2, fmt.Sprintf("-timeout %v: want a positive duration", *timeout))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fail(1, stores.Name(url)+":", err)
	}
	defer pool.Close()
	// The bar (on a terminal) is cleared before anything is printed.
	before := time.Now().Add(-age)
	sweepBefore := time.Now().Add(-pgstore.SweepGrace)
	p, n, pruneErr, err := prune(ctx, pool, before, sweepBefore, progress.OnTerminal(stderr, "pruning"))
	fmt.Fprintf(stdout, "%s: deleted %d ledger rows and %d key-count rows of periods that ended before %s\n",
		stores.Name(url), p.Usage, p.Groups, before.UTC().Format(time.RFC3339))
	if pruneErr != nil {
		return fail(1, stores.Name(url)+":", pruneErr)
	}
	fmt.Fprintf(stdout, "%s: deleted %d rows of rules that are not billable, of periods that ended before %s\n",
		stores.Name(url), n, sweepBefore.UTC().Format(time.RFC3339))
	if err != nil {
		return fail(1, stores.Name(url)+":", err)
	}
	return 0
}

// prune runs Prune(before) then, if it succeeded, Sweep(sweepBefore) on
// pool, and returns what each deleted and each one's error. Given a bar
// (on a terminal), it counts the rows to delete first and moves the bar
// after every batch by the batch's share of them, redrawn while a batch
// runs; the bar is cleared when it returns.
func prune(ctx context.Context, pool *pgxpool.Pool, before, sweepBefore time.Time, bar func(float64)) (p pgstore.Pruned, swept int64, pruneErr, sweepErr error) {
	done := progress.Steps(bar, 250*time.Millisecond)
	defer done(1)
	done(0)
	var batch func(int64)
	if bar != nil {
		// A count that fails leaves the bar at 0 until the end: the
		// prune itself says what failed.
		if total, err := pgstore.Prunable(ctx, pool, before, sweepBefore); err == nil && total > 0 {
			var deleted int64
			batch = func(rows int64) {
				deleted += rows
				done(min(float64(deleted)/float64(total), 0.99))
			}
		}
	}
	p, pruneErr = pgstore.PruneBatches(ctx, pool, before, batch)
	if pruneErr == nil {
		swept, sweepErr = pgstore.SweepBatches(ctx, pool, sweepBefore, batch)
	}
	return p, swept, pruneErr, sweepErr
}

// parseDatabaseCommand parses the command line of a command on one
// PostgreSQL database (migrate, migrate prune) with parseCommandLine, then
// finds its database with databaseArg; fail prints a message after the
// command's name and returns its exit code. It returns done with the exit
// code when the command line asked for help or is wrong (exit 2), else the
// database's URL.
func parseDatabaseCommand(fs *flag.FlagSet, store *string, args []string, stdout, stderr io.Writer, u usage, only string) (url string, fail func(int, ...any) int, code int, done bool) {
	if code, done := parseCommandLine(fs, args, stdout, stderr, u, 1); done {
		return "", nil, code, true
	}
	fail = daemon.ExitWith(stderr, fs.Name()+":")
	url, msg := databaseArg(fs, *store, fs.Name(), only)
	if msg != "" {
		return "", fail, fail(2, msg), true
	}
	return url, fail, 0, false
}

// databaseArg returns the PostgreSQL URL that -store (store) or the one
// argument of fs names, or a message for exit status 2 when it is given
// twice, not at all, or is not PostgreSQL's; cmd names the command in the
// message, and only says what only PostgreSQL does.
func databaseArg(fs *flag.FlagSet, store, cmd, only string) (url, msg string) {
	switch {
	case store != "" && fs.NArg() == 1:
		return "", "give the database once: -store or the URL argument, not both"
	case fs.NArg() == 1:
		store = fs.Arg(0)
	case store == "":
		return "", "give the database's URL (postgres://…). Run '" + cmd + " -h' for the usage."
	}
	if !stores.Is(store, stores.Postgres) {
		return "", fmt.Sprintf("%s is not a PostgreSQL URL (postgres:// or postgresql://): only PostgreSQL %s", stores.Name(store), only)
	}
	return store, ""
}

// runMigrate runs `sluice migrate`, and `sluice migrate prune`
// (runPrune).
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "prune" {
		return runPrune(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("sluice migrate", flag.ContinueOnError)
	store := fs.String("store", "", "the PostgreSQL database: a postgres:// or postgresql:// URL (or give it as the argument)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long (connecting, waiting for another migration's lock, applying)")
	url, fail, code, done := parseDatabaseCommand(fs, store, args, stdout, stderr, migrateUsage, "has migrations")
	if done {
		return code
	}
	if *timeout <= 0 {
		return fail(2, fmt.Sprintf("-timeout %v: want a positive duration", *timeout))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	before, after, err := migrate(ctx, url, progress.Steps(progress.OnTerminal(stderr, "migrating"), 250*time.Millisecond))
	if err != nil {
		return fail(1, stores.Name(url)+":", err)
	}
	printMigrations(stdout, stores.Name(url), before, after)
	return 0
}

// printMigrations says what migrate did: each migration applied, then the
// schema's version.
func printMigrations(w io.Writer, db string, before, after []appliedMigration) {
	n := 0
	for _, m := range after {
		if !slices.Contains(before, m) {
			fmt.Fprintf(w, "applied %s\n", m.Name)
			n++
		}
	}
	last := "none"
	if len(after) > 0 {
		last = after[len(after)-1].Name
	}
	if n == 0 {
		fmt.Fprintf(w, "%s: schema up to date (at %s); nothing applied\n", db, last)
		return
	}
	fmt.Fprintf(w, "%s: schema up to date (at %s); %d applied\n", db, last, n)
}

// appliedMigration is a row of sluice_schema_migrations.
type appliedMigration struct {
	Version int32
	Name    string
}

// migrate applies pgstore's migrations to the database at url and returns
// the rows of sluice_schema_migrations before and after; done is told of
// each step done (connected, read, applied), and of the end (1) whatever
// the outcome, before migrate returns.
func migrate(ctx context.Context, url string, done func(float64)) (before, after []appliedMigration, err error) {
	defer done(1)
	done(0)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, redact.Error(err, url)
	}
	defer pool.Close()
	if before, err = appliedMigrations(ctx, pool); err != nil {
		return nil, nil, err
	}
	done(0.25)
	if err = pgstore.Migrate(ctx, pool); err != nil {
		return nil, nil, err
	}
	done(0.9)
	after, err = appliedMigrations(ctx, pool)
	return before, after, err
}

// appliedMigrations reads sluice_schema_migrations, in order; none when
// the table does not exist yet.
func appliedMigrations(ctx context.Context, pool *pgxpool.Pool) ([]appliedMigration, error) {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('sluice_schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	rows, err := pool.Query(ctx, "SELECT version, name FROM sluice_schema_migrations ORDER BY version")
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[appliedMigration])
	if err != nil {
		return nil, errors.Join(errors.New("reading sluice_schema_migrations"), err)
	}
	return list, nil
}
