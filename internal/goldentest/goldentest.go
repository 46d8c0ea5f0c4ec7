// Package goldentest runs golden-file tests for parsers: a folder of inputs
// that must parse (valid) and one of inputs that must not (invalid), each
// NAME.yaml beside the NAME.golden that holds the expected rendering or the
// expected error text. It is the one walker behind config's and the proxy
// file's golden tests.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package goldentest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Parse parses one input named name; on success, render writes its
// rendering. A nil render with a nil error is a parse that succeeded.
type Parse func(name string, data []byte) (render func(w io.Writer), err error)

// Run walks root/valid and root/invalid. A valid input must parse and
// render as its golden; an invalid one must fail with its golden's text (an
// error's text and a newline). With update, the goldens are rewritten from
// the current output instead of compared. Either folder being empty fails
// the test, so that a moved testdata folder cannot pass by testing nothing.
func Run(t *testing.T, root string, update bool, parse Parse) {
	t.Helper()
	for _, dir := range []string{"valid", "invalid"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no golden inputs in %s: %v", filepath.Join(root, dir), err)
		}
		for _, file := range files {
			name := filepath.Base(file)
			t.Run(dir+"/"+strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				render, err := parse(name, data)
				var got bytes.Buffer
				switch {
				case dir == "valid" && err != nil:
					t.Fatalf("parse: %v", err)
				case dir == "invalid" && err == nil:
					t.Fatalf("parse succeeded, want an error")
				case err != nil:
					got.WriteString(err.Error() + "\n")
				case render != nil:
					render(&got)
				}
				golden := strings.TrimSuffix(file, ".yaml") + ".golden"
				if update {
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
