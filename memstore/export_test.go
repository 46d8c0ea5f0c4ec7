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

// TSCClock is tscClock, for tests.
type TSCClock = tscClock

// NewTSCClock is newTSCClock over a counter and a monotonic clock of the
// test's making.
func NewTSCClock(read, mono func() int64) *TSCClock { return newTSCClock(read, mono) }

// At is tscClock.at.
func (c *TSCClock) At(t int64) int64 { return c.at(t) }

// UsesTSC reports whether s reads the CPU's counter.
func UsesTSC(s *Store) bool { return s.tsc != nil }

// TSCKernel is tscKernel.
func TSCKernel() bool { return tscKernel() }

// TSC error bounds, for tests.
const (
	TSCMaxPairNS     = maxPairNS
	TSCSpanNS        = spanNS
	TSCCalibrationNS = calibrationNS
)

// Now returns s's current instant as its decisions read it.
func Now(s *Store) int64 { return s.now() }

// NewWideTSC returns a store configured by cfg (without a Clock) that reads
// the CPU's counter with no bound on an anchor's pair of monotonic reads:
// under valgrind, where a monotonic read takes microseconds, no pair would
// pass the bound and every reading would be the monotonic clock's. Its
// readings are not within the bound: for counting instructions only.
func NewWideTSC(cfg Config) *Store {
	s := New(cfg)
	s.tsc = newTSCClock(rdtsc, s.monoNow)
	s.tsc.maxPair = 1 << 62
	return s
}
