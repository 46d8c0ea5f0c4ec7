//go:build unix

package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func exec(t *testing.T, c *pgx.Conn, sql string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Exec(ctx, sql)
	return err
}

// TestSchemasAreIsolated: a table a test creates without a schema name lands
// in its own schema, invisible to another test's.
func TestSchemasAreIsolated(t *testing.T) {
	a, b := pgtest.Connect(t, pgtest.Schema(t)), pgtest.Connect(t, pgtest.Schema(t))
	if err := exec(t, a, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	if err := exec(t, a, "SELECT * FROM only_in_a"); err != nil {
		t.Fatalf("the table is not visible where it was made: %v", err)
	}
	if err := exec(t, b, "SELECT * FROM only_in_a"); err == nil {
		t.Fatal("a table made in one test's schema is visible in another's")
	}
}

// TestCrashAndStartKeepsCommittedRows: a dedicated server crashed (an
// immediate shutdown) and started again answers on the same port with every
// committed row, and refuses connections while it is down.
func TestCrashAndStartKeepsCommittedRows(t *testing.T) {
	s := pgtest.StartServer(t)
	c := pgtest.Connect(t, s.URL())
	if err := exec(t, c, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Crash(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pgx.Connect(ctx, s.URL()); err == nil {
		t.Fatal("connected to a crashed server")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pgtest.Connect(t, s.URL()).QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after the restart: %d rows, %v; want 2", n, err)
	}
}

// TestSettingsOverrideTheDefaults: a setting given to StartServer wins over
// the package's own (fsync is off by default, as on the shared server).
func TestSettingsOverrideTheDefaults(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string
	}{{pgtest.Shared(t).URL(), "off"}, {pgtest.StartServer(t, "fsync=on").URL(), "on"}} {
		var got string
		if err := pgtest.Connect(t, tc.url).QueryRow(context.Background(), "SHOW fsync").Scan(&got); err != nil || got != tc.want {
			t.Errorf("fsync is %q, %v; want %q", got, err, tc.want)
		}
	}
}
