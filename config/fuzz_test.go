package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/strictyaml"
)

// FuzzParse feeds Parse arbitrary bytes: it must never panic, every error
// must be an *Error that names the file, and whatever parses must dump and
// answer lookups.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.yaml"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(matchConfig))
	f.Add([]byte("domain: a\ndescriptors:\n  - &d {key: k, descriptors: [*d]}\n"))
	f.Add([]byte("domain: [a]\n"))
	f.Add([]byte("<<: {domain: m}\n"))
	f.Add([]byte("domain: x\ndescriptors:\n- key: k\n  value: '*a*'\n  rate_limit: {unit: week, requests_per_unit: 4294967295, algorithm: leaky_bucket, burst: 9007199254740992}\n"))
	// Aliases and duplicates: what strictyaml bounds and refuses.
	f.Add(aliasedReplaces(2000))
	f.Add(laughs(3))
	f.Add([]byte("domain: x\ndescriptors:\n  - key: k\n    rate_limit: &r {unit: second, requests_per_unit: 1}\n  - {key: j, rate_limit: *r}\n"))
	f.Add([]byte("domain: x\ndescriptors:\n  - key: k\n    rate_limit: {<<: [{unit: second}, {unit: minute}], requests_per_unit: 1}\n"))
	f.Add([]byte("domain: x\ndomain: y\n"))
	f.Add(manyKeys(50, "k00000: 2\n"))
	f.Add([]byte("domain: x\ndescriptors:\n  - {key: k, value: a*}\n  - {key: k, value: a*}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("fuzz.yaml", data)
		if err != nil {
			e, ok := errors.AsType[*Error](err)
			if !ok || e.File != "fuzz.yaml" || e.Msg == "" {
				t.Fatalf("error %T %q is not an *Error naming the file", err, err)
			}
			return
		}
		d.Dump(io.Discard)
		for _, req := range [][]Entry{
			{{"k", "v"}},
			{{"key", ""}, {"k", "a"}},
			{{"remote_address", "x"}, {"path", "/"}},
		} {
			if r := d.Lookup(req); r != nil && len(r.Path) != len(req) {
				t.Fatalf("rule %s with a path of %d matched %d entries", r.FullKey, len(r.Path), len(req))
			}
		}
	})
}

// TestAliasBombs checks that aliases cannot make Parse do exponential work:
// a file whose aliases double at each level is refused at the alias that
// takes it past its node budget, whether the aliases are merged (<<) or
// descriptors.
func TestAliasBombs(t *testing.T) {
	var merge, tree strings.Builder
	merge.WriteString("domain: bomb\ndescriptors:\n  - key: k0\n    rate_limit: &m0 {unit: second, requests_per_unit: 1}\n")
	tree.WriteString("domain: bomb\ndescriptors:\n  - &t0 {key: a0}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&merge, "  - key: k%d\n    rate_limit: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
		fmt.Fprintf(&tree, "  - &t%d {key: a%d, descriptors: [*t%d, {key: b, descriptors: [*t%d]}]}\n", i, i, i-1, i-1)
	}
	for name, data := range map[string]string{"merge.yaml": merge.String(), "tree.yaml": tree.String()} {
		_, err := Parse(name, []byte(data))
		if !errors.Is(err, strictyaml.ErrBudget) || !strings.Contains(err.Error(), "expands the document past") {
			t.Errorf("%s: %v, want an error wrapping strictyaml.ErrBudget", name, err)
		}
	}
}
