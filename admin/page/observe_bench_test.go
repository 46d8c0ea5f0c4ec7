package page

import (
	"testing"

	"github.com/sluicehq/sluice/service"
)

// BenchmarkObserve is the page's cost per decision: an allowed one (a map
// read and an add) and a refused one (its key hashed, the sketch and the
// ring updated).
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
}
