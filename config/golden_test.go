package config

import (
	"bytes"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/goldentest"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata with the current output")

// TestGolden walks testdata/valid and testdata/invalid. Each NAME.yaml is
// parsed; its NAME.golden holds the expected Dump (valid) or the expected
// error (invalid), which names the file, line and column. Run
// `go test ./config -run Golden -update` to rewrite them, then review the
// diff.
func TestGolden(t *testing.T) {
	goldentest.Run(t, "testdata", *update, func(name string, data []byte) (func(io.Writer), error) {
		d, err := Parse(name, data)
		if err != nil {
			return nil, err
		}
		return func(w io.Writer) { d.Dump(w) }, nil
	})
}

// TestLoadGoldenDir loads every valid golden file as one directory, the way
// a deployment does, and checks that the result dumps as the files do one
// by one.
func TestLoadGoldenDir(t *testing.T) {
	dir := filepath.Join("testdata", "valid")
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if got := len(c.Domains()); got != len(files) {
		t.Fatalf("Load(%s) has %d domains, want %d", dir, got, len(files))
	}
	var b bytes.Buffer
	c.Dump(&b)
	if !strings.Contains(b.String(), "domain sql_pool ("+filepath.Join(dir, "database.yaml")+")") {
		t.Errorf("Dump does not name the domain's file:\n%s", b.String())
	}
}
