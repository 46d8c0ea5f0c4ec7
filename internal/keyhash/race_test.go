//go:build race

package keyhash

// raceEnabled reports whether the tests run under the race detector, whose
// sync.Pool drops items at random, so that allocation counts vary.
const raceEnabled = true
