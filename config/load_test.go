package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadDirectory(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml":       "domain: alpha\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"b.yml":        "domain: beta\n",
		".hidden.yaml": "domain: alpha\n",
		"notes.txt":    "not yaml: [",
		"sub/c.yaml":   "domain: alpha\n",
	})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range c.Domains() {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "alpha,beta" {
		t.Errorf("domains = %v, want alpha, beta", names)
	}
	if r := c.Lookup("alpha", []Entry{{"k", "v"}}); r == nil || r.File != filepath.Join(dir, "a.yaml") {
		t.Errorf("Lookup = %+v, want the rule of a.yaml", r)
	}
	if d := c.Domain("beta"); d == nil || d.Rules() != 0 || d.File != filepath.Join(dir, "b.yml") {
		t.Errorf("Domain(beta) = %+v", d)
	}
}

func TestLoadFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"one.conf": "domain: solo\n"})
	c, err := Load(filepath.Join(dir, "one.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Domain("solo") == nil {
		t.Error("domain solo missing")
	}
}

func TestLoadErrors(t *testing.T) {
	dup := writeFiles(t, map[string]string{
		"a.yaml": "domain: same\n",
		"b.yaml": "# b\ndomain: same\n",
	})
	bad := writeFiles(t, map[string]string{
		"a.yaml": "domain: fine\n",
		"b.yaml": "domain: broken\ndescriptors:\n  - key: k\n    rate_limit: {unit: lightyear, requests_per_unit: 1}\n",
	})
	empty := t.TempDir()
	tests := []struct {
		path string
		want string
	}{
		{dup, filepath.Join(dup, "b.yaml") + `:2: config: duplicate domain "same" (also in ` + filepath.Join(dup, "a.yaml") + ":1)"},
		{bad, filepath.Join(bad, "b.yaml") + `:4:18: config: invalid rate limit unit "lightyear"`},
		{empty, empty + ": config: no .yaml or .yml files in directory"},
		{filepath.Join(empty, "missing.yaml"), filepath.Join(empty, "missing.yaml") + ": config: cannot read: no such file or directory"},
	}
	for _, tt := range tests {
		_, err := Load(tt.path)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Load(%s) = %v, want an error starting %q", tt.path, err, tt.want)
		}
		if _, ok := errors.AsType[*Error](err); !ok {
			t.Errorf("Load(%s) error %T is not an *Error", tt.path, err)
		}
	}
	if _, err := Load(filepath.Join(empty, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error for a missing file does not wrap os.ErrNotExist: %v", err)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "f.yaml", Line: 3, Column: 7, Msg: "bad"}, "f.yaml:3:7: config: bad"},
		{Error{File: "f.yaml", Line: 3, Msg: "bad"}, "f.yaml:3: config: bad"},
		{Error{File: "f.yaml", Msg: "bad"}, "f.yaml: config: bad"},
		{Error{Msg: "bad"}, "config: bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
