//go:build !race

package config

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
