package rlqs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/rlqstest"
	"github.com/sluicehq/sluice/rlqs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Wrap(m), redistest.IgnoreRueidis()...) }

// edgeYAML is the config the simulations run: 100 requests per second on
// bucket {api: <anything>}, shared by every Envoy that reports it.
const edgeYAML = `
domain: edge
rlqs:
  assignment_ttl: 20s
  abandon_after: 60s
  report_ttl: 15s
descriptors:
  - key: api
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket}
  - key: open
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
`

func newServer(t testing.TB, store rlqs.Store) *rlqs.Server {
	t.Helper()
	c := configtest.Parse(t, edgeYAML)
	s, err := rlqs.New(rlqs.Config{Rules: func() *config.Config { return c }, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var apiBucket = map[string]string{"api": "v1"}

// fleet is simulated Envoys, each named (ClientHeader), each dialing the
// server its pick returns.
type fleet struct {
	clients []*rlqstest.Client
	ctx     context.Context
}

func newFleet(ctx context.Context, n int, srv func(i int) *rlqs.Server) *fleet {
	f := &fleet{ctx: ctx}
	for i := range n {
		md := metadata.Pairs(rlqs.ClientHeader, "envoy-"+string(rune('a'+i)))
		f.clients = append(f.clients, rlqstest.New(rlqstest.Settings{Domain: "edge"}, func() (rlqstest.Conn, error) {
			return rlqstest.Pipe(ctx, md, srv(i).StreamRateLimitQuotas), nil
		}))
	}
	return f
}

func (f *fleet) close() {
	for _, c := range f.clients {
		c.Close()
	}
}

// drive sends client i's requests at rate(i) per second (0: none) for d
// and returns what each admitted.
func (f *fleet) drive(d time.Duration, rate func(i int) float64) []int {
	admitted := make([]int, len(f.clients))
	var wg sync.WaitGroup
	for i, c := range f.clients {
		r := rate(i)
		if r <= 0 {
			continue
		}
		wg.Go(func() {
			gap := time.Duration(float64(time.Second) / r)
			for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(gap) {
				if c.Request(apiBucket) {
					admitted[i]++
				}
			}
		})
	}
	wg.Wait()
	return admitted
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
