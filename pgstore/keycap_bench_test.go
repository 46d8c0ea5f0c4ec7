package pgstore_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/pgtest"
)

// BenchmarkKeyCapTrigger is what migration 0003's trigger costs the first
// row of a key in a period, measured inside the server: each iteration is
// EXPLAIN ANALYZE of one key's first insert (its own transaction, one
// group for all), and the run reports the medians of the trigger's time
// and of the statement's execution time. cap=100000 takes a place in the
// group (the row write and lock on sluice_usage_groups); cap=0 is the
// trigger returning at once (the session's cap unset), its call alone.
// Execution times inside the server do not count the round trip, the
// parse or the commit, so they are steadier than a decision's wall time
// on a busy machine.
func BenchmarkKeyCapTrigger(b *testing.B) {
	srv := pgtest.StartServer(b, "fsync=off")
	openURL(b, srv.URL(), nil) // migrates
	ctx := context.Background()
	c, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	n := 0 // keys inserted, across runs: each iteration's key is new
	for _, capKeys := range []string{"100000", "0"} {
		b.Run("cap="+capKeys, func(b *testing.B) {
			if _, err := c.Exec(ctx, `SELECT set_config('sluice.max_keys_per_group', $1, false)`, capKeys); err != nil {
				b.Fatal(err)
			}
			var trig, exec []float64
			for b.Loop() {
				key := []byte(run + ":" + strconv.Itoa(n))
				n++
				var plan []struct {
					Execution float64 `json:"Execution Time"`
					Triggers  []struct {
						Time float64 `json:"Time"`
					} `json:"Triggers"`
				}
				if err := c.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON)
INSERT INTO sluice_usage (key_hash, period_start, period_end, key, count, quota, key_group)
VALUES (sha256($1::bytea), date_trunc('hour', now()), date_trunc('hour', now()) + interval '1 hour', $1::bytea, 1, 1000, sha256($2::bytea))`,
					key, []byte(run+capKeys)).Scan(&plan); err != nil {
					b.Fatal(err)
				}
				if len(plan) != 1 || len(plan[0].Triggers) != 1 {
					b.Fatalf("plan %+v: want one statement that ran the trigger", plan)
				}
				trig = append(trig, plan[0].Triggers[0].Time*1000)
				exec = append(exec, plan[0].Execution*1000)
			}
			slices.Sort(trig)
			slices.Sort(exec)
			b.ReportMetric(trig[len(trig)/2], "trigger-µs")
			b.ReportMetric(exec[len(exec)/2], "exec-µs")
		})
	}
}
