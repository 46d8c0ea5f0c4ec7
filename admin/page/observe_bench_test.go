package page

import (
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/service"
)

// BenchmarkObserve is the page's cost per decision: an allowed one (a map
// read and an add) and a refused one (its key hashed, the sketch and the
// ring updated; its key hashed only if not refused lately). refused/new
// is the worst case: every refusal of a key not seen lately, 4096 keys in
// turn, more than the cache of hashes holds.
func BenchmarkObserve(b *testing.B) {
	for _, c := range []struct {
		name    string
		outcome service.Outcome
	}{{"allowed", service.Allowed}, {"refused", service.Limited}} {
		b.Run(c.name, func(b *testing.B) {
			p := New(Config{})
			d := service.Decision{Domain: "d", Rule: "d.ip", Outcome: c.outcome, Cost: 1, Key: "d|remote_address=203.0.113.7"}
			b.ReportAllocs()
			for b.Loop() {
				p.Observe(d)
			}
		})
	}
	b.Run("refused/new", func(b *testing.B) {
		p := New(Config{})
		ds := make([]service.Decision, 4096)
		for i := range ds {
			ds[i] = service.Decision{Domain: "d", Rule: "d.ip", Outcome: service.Limited, Cost: 1, Key: "d|remote_address=198.51." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			p.Observe(ds[i%len(ds)])
			i++
		}
	})
}
