package algorithm_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain keeps rapid from writing fail files into testdata/ (and replaying
// them on later runs) unless asked to with -rapid.nofailfile=false or
// RAPID_NOFAILFILE: a failing property prints its minimal input instead.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.nofailfile" })
	if _, env := os.LookupEnv("RAPID_NOFAILFILE"); !explicit && !env {
		if err := flag.Set("rapid.nofailfile", "true"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
