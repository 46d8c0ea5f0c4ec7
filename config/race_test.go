//go:build race

package config

// raceEnabled reports whether the tests run under the race detector, which
// makes yaml.v3 about twenty times slower; the hostile-input tests then
// read smaller files.
const raceEnabled = true
