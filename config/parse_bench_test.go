package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParse parses a golden file (about 1 KB, forward auth included)
// and a generated file of 1000 rules that share a rate_limit through an
// alias and a replaces list, about 100 KB.
func BenchmarkParse(b *testing.B) {
	golden, err := os.ReadFile(filepath.Join("testdata", "valid", "forward_auth.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var gen bytes.Buffer
	gen.WriteString("domain: bench\ndescriptors:\n  - key: default\n    rate_limit: &r {unit: second, requests_per_unit: 10, name: base}\n")
	for i := range 1000 {
		fmt.Fprintf(&gen, "  - key: user\n    value: u%d\n    descriptors:\n      - {key: path, value: /api/*, rate_limit: {unit: minute, requests_per_unit: 100, replaces: [{name: base}]}}\n      - {key: path, rate_limit: *r}\n", i)
	}
	for _, bc := range []struct {
		name string
		data []byte
	}{{"golden=1KB", golden}, {fmt.Sprintf("rules=1000/bytes=%d", gen.Len()), gen.Bytes()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse("bench.yaml", bc.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
