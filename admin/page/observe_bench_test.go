package page

import (
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/service"
)

// BenchmarkObserve is the page's cost per decision: an allowed one (a map
// read and an add) and a refused one (the ring updated; the sketch too,
// and the key hashed, from its second refusal, its hash kept while it is
// refused lately). refused/one is one key refused again and again;
// refused/new cycles 4096 keys, more than the cache of hashes holds;
// refused/once is a flood of keys refused once each (2^18 keys in turn,
// each back long after the page forgot it), as spoofed addresses would
// be. Each is a leaf, so that a pattern runs it alone (callgrind counts
// one at a time).
func BenchmarkObserve(b *testing.B) {
	b.Run("allowed", func(b *testing.B) {
		observeEach(b, []service.Decision{{Domain: "d", Rule: "d.ip", Outcome: service.Allowed, Cost: 1, Key: "d|remote_address=203.0.113.7"}})
	})
	b.Run("refused", func(b *testing.B) {
		for _, c := range []struct {
			name string
			keys int
		}{{"one", 1}, {"new", 4096}, {"once", 1 << 18}} {
			b.Run(c.name, func(b *testing.B) {
				ds := make([]service.Decision, c.keys)
				for i := range ds {
					ds[i] = service.Decision{Domain: "d", Rule: "d.ip", Outcome: service.Limited, Cost: 1, Key: "d|remote_address=10." + strconv.Itoa(i>>16) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)}
				}
				observeEach(b, ds)
			})
		}
	})
}

// observeEach observes ds in turn, b.N in all.
func observeEach(b *testing.B, ds []service.Decision) {
	p := New(Config{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.Observe(ds[i%len(ds)])
		i++
	}
}
