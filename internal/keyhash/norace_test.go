//go:build !race

package keyhash

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
