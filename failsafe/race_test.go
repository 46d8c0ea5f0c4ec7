//go:build race

package failsafe_test

// raceEnabled reports whether the race detector is on: allocation counts
// vary under it.
const raceEnabled = true
