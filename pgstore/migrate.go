package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles are the schema's migrations: migrations/NNNN_name.sql,
// applied in the order of their numbers. A shipped file is never edited; a
// change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the advisory lock key that serialises Migrate across
// processes: "sluice" in ASCII.
const migrationLock int64 = 0x736c75696365

// A migration is one numbered SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order. Two files of one
// number are an error.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("pgstore: migration %s is not named NNNN_name.sql", base)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("pgstore: migrations %s and %s share the number %d", other, base, v)
		}
		seen[v] = base
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Migrate brings the schema of the pool's database (its first schema on the
// search_path) up to date: it applies, in order, the embedded migrations
// that sluice_schema_migrations does not list, and lists them there. It is
// idempotent, and safe to run from many processes at once: all of it runs in
// one transaction that first takes an advisory lock, so a second process
// waits, then finds the work done. Either every pending migration is applied
// or none is. Migrations the database lists but this binary does not know
// (a newer binary's) are left alone. The wait for the lock ends with ctx.
//
// The table is named sluice_schema_migrations, not schema_migrations, so as
// not to collide with a migration tool's table in a shared database.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS sluice_schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("creating sluice_schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, "SELECT version FROM sluice_schema_migrations")
		if err != nil {
			return err
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("reading sluice_schema_migrations: %w", err)
		}
		done := map[int]bool{}
		for _, v := range applied {
			done[int(v)] = true
		}
		for _, m := range ms {
			if done[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("applying %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO sluice_schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return fmt.Errorf("recording %s: %w", m.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: migrating: %w", err)
	}
	return nil
}
