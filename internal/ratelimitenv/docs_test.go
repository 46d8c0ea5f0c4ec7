package ratelimitenv

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	dollarName = regexp.MustCompile("`\\$([A-Z][A-Z0-9_]*)`")
)

// docNames returns the variables that the first column of the table in
// docs/serve.md's section on envoyproxy/ratelimit's variables names: a
// name written whole; "_SUFFIX" after a name, read as that name's prefix
// and the suffix; "PREFIX_*", every row of the table with that prefix.
// Names built at run time ("DOG_STATSD_MOGRIFIER_<N>_PATTERN") and those
// the OpenTelemetry exporter reads itself (OTEL_EXPORTER_OTLP_*) are left
// out.
func docNames(t *testing.T, section string, rows []string) []string {
	t.Helper()
	var out []string
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| variable ") {
			continue
		}
		cell, _, _ := strings.Cut(line[2:], " | ")
		prev := ""
		for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
			tok := m[1]
			switch {
			case strings.Contains(tok, "<"), strings.HasPrefix(tok, "OTEL_EXPORTER_OTLP_"):
				prev = ""
			case strings.HasPrefix(tok, "_") && prev == "":
			case strings.HasSuffix(tok, "*"):
				n := len(out)
				for _, r := range rows {
					if strings.HasPrefix(r, strings.TrimSuffix(tok, "*")) {
						out = append(out, r)
					}
				}
				if len(out) == n {
					t.Errorf("docs name %s, and no row of the table matches", tok)
				}
			case strings.HasPrefix(tok, "_"):
				found := false
				for i := len(prev) - 1; i > 0; i-- {
					if prev[i] == '_' && slices.Contains(rows, prev[:i]+tok) {
						out, found = append(out, prev[:i]+tok), true
						break
					}
				}
				if !found {
					t.Errorf("docs name %s after %s, and no row of the table is it", tok, prev)
				}
			case envName.MatchString(tok):
				out, prev = append(out, tok), tok
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// docs/serve.md documents the table's variables, each once where it
// belongs: envoyproxy/ratelimit's in its section's table, Sluice's own as
// the default of their flags (`$NAME`), and the other commands' in their
// docs; and it names no variable that the table does not hold.
func TestDocsListTheTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, section, ok := strings.Cut(doc, "\n## envoyproxy/ratelimit's environment variables\n")
	if !ok {
		t.Fatal("docs/serve.md has no section on envoyproxy/ratelimit's environment variables")
	}
	section, _, _ = strings.Cut(section, "\n## ")

	var envoy, own, all []string
	for _, v := range Vars {
		all = append(all, v.Name)
		switch {
		case v.Command != "":
			if !docsMention(t, v.Name) {
				t.Errorf("%s (read by %s) is in no file of docs/", v.Name, v.Command)
			}
		case v.Own:
			own = append(own, v.Name)
		default:
			envoy = append(envoy, v.Name)
		}
	}
	slices.Sort(envoy)
	if got := docNames(t, section, all); !slices.Equal(got, envoy) {
		for _, n := range envoy {
			if !slices.Contains(got, n) {
				t.Errorf("%s: envoyproxy/ratelimit's in the table, not in docs/serve.md's section on its variables", n)
			}
		}
		for _, n := range got {
			if !slices.Contains(envoy, n) {
				t.Errorf("%s: in docs/serve.md's section on envoyproxy/ratelimit's variables, not one of the table's", n)
			}
		}
	}
	var dollars []string
	for _, m := range dollarName.FindAllStringSubmatch(doc, -1) {
		dollars = append(dollars, m[1])
		if !slices.Contains(all, m[1]) {
			t.Errorf("docs/serve.md names $%s, which the table does not hold", m[1])
		}
	}
	for _, n := range own {
		if !slices.Contains(dollars, n) && !regexp.MustCompile("`"+n+"[`=]").MatchString(doc) {
			t.Errorf("%s: Sluice's own, and docs/serve.md does not name it (`$%s` or `%s=...`)", n, n, n)
		}
	}
}

// docsMention reports whether a file of docs/ names the variable.
func docsMention(t *testing.T, name string) bool {
	t.Helper()
	paths, _ := filepath.Glob("../../docs/*.md")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), name) {
			return true
		}
	}
	return false
}
