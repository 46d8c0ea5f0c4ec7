package gateway

import (
	"testing"

	"github.com/sluicehq/sluice/memstore"
)

// A Gateway built from a parsed file serves with the patterns ParseFile
// registered (and found conflicts with) rather than registering them all
// again, which costs up to the square of their number in ServeMux's
// conflict checks; so does each Update with a newly parsed file.
func TestGatewayOfAParsedFileRegistersNoPatternAgain(t *testing.T) {
	parse := func() Config {
		f, err := ParseFile("proxy.yaml", []byte(`
upstream: http://127.0.0.1:9
limits: [{name: l, key: ip, rate: 10r/s}]
routes:
  - {name: a, match: [/a/, "GET /b/{id}"], limits: [l]}
  - {name: c, match: api.example.com/}
`))
		if err != nil {
			t.Fatal(err)
		}
		f.Config.Limiter = memstore.New(memstore.Config{SweepInterval: -1})
		t.Cleanup(func() { f.Config.Limiter.(*memstore.Store).Close() })
		return f.Config
	}
	cfg := parse()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.state.Load().mux != cfg.index.mux {
		t.Error("New registered the parsed file's patterns again")
	}
	next := parse()
	if err := g.Update(next); err != nil {
		t.Fatal(err)
	}
	if g.state.Load().mux != next.index.mux {
		t.Error("Update registered the parsed file's patterns again")
	}
}
