package memstore

import "github.com/sluicehq/sluice"

// NewManualCoarse returns a store configured by cfg whose coarse clock
// publishes a reading only when tick is called, with no goroutine: for
// tests that decide exactly when the reading moves.
func NewManualCoarse(cfg Config) (s *Store, tick func()) {
	cfg.ClockResolution = 0
	s = New(cfg)
	s.coarse = newCoarseClock(s.exactNow)
	return s, s.coarse.tick
}

// SameLimit is sameLimit, for tests.
func SameLimit(a, b sluice.Limit) bool { return sameLimit(&a, &b) }
