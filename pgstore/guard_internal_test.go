package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/pgtest"
)

// TestMain runs every test of the package (internal and external) through
// pgtest.Main, which stops the shared server at the end.
func TestMain(m *testing.M) { pgtest.Main(m) }

// TestInsertPathIsGuarded: a first decision whose cost alone exceeds the
// quota inserts nothing and is denied (the DO UPDATE's WHERE guards only
// the update path; AllowN's input check never lets such a cost through, so
// the statement is called directly here).
func TestInsertPathIsGuarded(t *testing.T) {
	// The schema first: the package's first test to ask starts the
	// shared server (initdb and all), which under load took much of the
	// deadline meant for the store's calls.
	url := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, url, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	count, ok, _, err := s.spend(ctx, "k", start, start.AddDate(0, 1, 0), 3, 5, true)
	if err != nil || ok || count != 0 {
		t.Fatalf("spend(cost 5, quota 3) on a fresh key = count %d, admitted %v, %v; want denied, count 0", count, ok, err)
	}
	if u, err := s.Usage(ctx, "k"); err != nil || len(u) != 0 {
		t.Fatalf("Usage after the denied insert = %+v, %v; want no row", u, err)
	}
}
