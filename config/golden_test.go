package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata with the current output")

// TestGolden walks testdata/valid and testdata/invalid. Each NAME.yaml is
// parsed; its NAME.golden holds the expected Dump (valid) or the expected
// error (invalid), which names the file, line and column. Run
// `go test ./config -run Golden -update` to rewrite them, then review the
// diff.
func TestGolden(t *testing.T) {
	for _, dir := range []string{"valid", "invalid"} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no golden inputs in testdata/%s: %v", dir, err)
		}
		for _, file := range files {
			name := filepath.Base(file)
			t.Run(dir+"/"+strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				d, err := Parse(name, data)
				var got bytes.Buffer
				switch {
				case dir == "valid" && err != nil:
					t.Fatalf("Parse: %v", err)
				case dir == "invalid" && err == nil:
					t.Fatalf("Parse succeeded, want an error")
				case err != nil:
					got.WriteString(err.Error() + "\n")
				default:
					d.Dump(&got)
				}
				golden := strings.TrimSuffix(file, ".yaml") + ".golden"
				if *update {
					if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if got.String() != string(want) {
					t.Errorf("%s: got\n%s\nwant\n%s", name, got.String(), want)
				}
			})
		}
	}
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
