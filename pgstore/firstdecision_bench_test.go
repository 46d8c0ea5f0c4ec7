package pgstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

// BenchmarkFirstDecisions measures a key's first decision in a period,
// the one that takes the key's place in its group under
// Config.MaxKeysPerGroup: every timed decision is of a new key, all of one
// group (a group of their own per run), exactly conc goroutines on a pool
// of conc connections, fsync=off. cap=off is MaxKeysPerGroup -1, cap=on
// the default (100,000). It reports decisions/s, p50 and p99.
func BenchmarkFirstDecisions(b *testing.B) {
	srv := pgtest.StartServer(b, "fsync=off")
	for _, maxKeys := range []int64{-1, 0} {
		for _, conc := range []int{1, 16} {
			name := "cap=on/conc=" + strconv.Itoa(conc)
			if maxKeys < 0 {
				name = "cap=off/conc=" + strconv.Itoa(conc)
			}
			b.Run(name, func(b *testing.B) { benchFirstDecisions(b, srv.URL(), conc, maxKeys) })
		}
	}
}

func benchFirstDecisions(b *testing.B, url string, conc int, maxKeys int64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, url+"&pool_max_conns="+strconv.Itoa(conc)+"&pool_min_conns="+strconv.Itoa(conc),
		pgstore.Config{MaxKeysPerGroup: maxKeys})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: sluice.MaxRate, Period: time.Hour}
	// One group per run ("first_<run>"), so that runs do not fill each
	// other's cap.
	group := "first_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "_"
	warm(b, conc, func(i int) error {
		_, err := s.Allow(context.Background(), group+"warm"+strconv.Itoa(i), lim)
		return err
	})
	lat := storetest.TimedDecisions(b, conc, func(i int64) (sluice.Result, error) {
		return s.Allow(context.Background(), group+strconv.FormatInt(i, 10), lim)
	})
	reportLatency(b, lat)
}
