package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
// merges expand each mapping once, and descriptors stop at maxDescriptors.
func TestAliasBombs(t *testing.T) {
	var merge, tree strings.Builder
	merge.WriteString("domain: bomb\ndescriptors:\n  - key: k0\n    rate_limit: &m0 {unit: second, requests_per_unit: 1}\n")
	tree.WriteString("domain: bomb\ndescriptors:\n  - &t0 {key: a0}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&merge, "  - key: k%d\n    rate_limit: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
		fmt.Fprintf(&tree, "  - &t%d {key: a%d, descriptors: [*t%d, {key: b, descriptors: [*t%d]}]}\n", i, i, i-1, i-1)
	}
	if _, err := Parse("merge.yaml", []byte(merge.String())); err != nil {
		t.Errorf("merge bomb: %v", err)
	}
	_, err := Parse("tree.yaml", []byte(tree.String()))
	if err == nil || !strings.Contains(err.Error(), "more than 200000 descriptors") {
		t.Errorf("tree bomb: %v", err)
	}
}
