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

	"github.com/sluicehq/sluice/internal/redact"
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
them on start too, unless -migrate=false. Exit status 1 when the database
cannot be reached or a migration fails, 2 for a usage error.`,
	examples: []string{
		"sluice migrate postgres://sluice@db:5432/sluice",
		"sluice migrate -store postgres://sluice@db:5432/sluice -timeout 1m",
	},
}

// runMigrate runs `sluice migrate`.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice migrate", flag.ContinueOnError)
	store := fs.String("store", "", "the PostgreSQL database: a postgres:// or postgresql:// URL (or give it as the argument)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long (connecting, waiting for another migration's lock, applying)")
	if code, done := parseCommandLine(fs, args, stdout, stderr, migrateUsage, 1); done {
		return code
	}
	fail := exitWith(stderr, "sluice migrate:")
	url := *store
	switch {
	case url != "" && fs.NArg() == 1:
		return fail(2, "give the database once: -store or the URL argument, not both")
	case fs.NArg() == 1:
		url = fs.Arg(0)
	case url == "":
		return fail(2, "give the database's URL (postgres://…). Run 'sluice migrate -h' for the usage.")
	}
	if !isPostgres(url) {
		return fail(2, fmt.Sprintf("%s is not a PostgreSQL URL (postgres:// or postgresql://): only PostgreSQL has migrations", storeName(url)))
	}
	if *timeout <= 0 {
		return fail(2, fmt.Sprintf("-timeout %v: want a positive duration", *timeout))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	before, after, err := migrate(ctx, url)
	if err != nil {
		return fail(1, storeName(url)+":", err)
	}
	printMigrations(stdout, storeName(url), before, after)
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
// the rows of sluice_schema_migrations before and after.
func migrate(ctx context.Context, url string) (before, after []appliedMigration, err error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, redact.Error(err, url)
	}
	defer pool.Close()
	if before, err = appliedMigrations(ctx, pool); err != nil {
		return nil, nil, err
	}
	if err = pgstore.Migrate(ctx, pool); err != nil {
		return nil, nil, err
	}
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
