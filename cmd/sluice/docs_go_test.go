package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goBlock is a fenced Go block of a markdown file and what its program
// has around it (a <!-- go: given ... --> marker).
type goBlock struct {
	where string // file:line of the opening fence
	given string // Go parameters: "ctx context.Context, store *memstore.Store"
	text  string
}

// givenRE is the marker that names what a Go block uses without
// declaring it, the surrounding program's: <!-- go: given NAME TYPE, ... -->.
var givenRE = regexp.MustCompile(`^<!--\s*go:\s*given\s+(.*?)\s*-->$`)

// goBlocks returns the ```go blocks of the markdown file name.
func goBlocks(t *testing.T, name string) []goBlock {
	t.Helper()
	var out []goBlock
	for _, f := range fences(t, name) {
		if f.lang != "go" {
			continue
		}
		given := ""
		if m := givenRE.FindStringSubmatch(f.before); m != nil {
			given = m[1]
		}
		out = append(out, goBlock{where: fmt.Sprintf("%s:%d", strings.TrimPrefix(name, "../../"), f.line), given: given, text: f.text})
	}
	return out
}

// docImports maps the package names the docs' Go blocks may use to their
// import paths: Sluice's own (every directory of the module with Go files)
// and the few others the docs name.
func docImports(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{
		"sluice": "github.com/sluicehq/sluice", "context": "context", "errors": "errors", "fmt": "fmt",
		"http": "net/http", "netip": "net/netip", "slog": "log/slog", "time": "time", "io": "io", "os": "os",
		"grpc": "google.golang.org/grpc", "credentials": "google.golang.org/grpc/credentials",
		"prometheus": "github.com/prometheus/client_golang/prometheus",
	}
	dirs, err := filepath.Glob("../../*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range dirs {
		dir := filepath.Base(filepath.Dir(f))
		if dir == "internal" || dir == "cmd" || dir == "examples" || dir == "bench" || dir == "deploy" {
			continue
		}
		m[dir] = "github.com/sluicehq/sluice/" + dir
	}
	return m
}

// Every Go block of README.md and docs/*.md compiles (type-checks) as
// written: a block that starts with package is a file; any other is the
// body of a function whose parameters are its marker's given (what the
// surrounding program has, such as ctx context.Context), with the imports
// of the packages it names. A variable or an import a snippet leaves
// unused is not an error (the rest of the program would use it); anything
// else the compiler would refuse is.
func TestDocsGoBlocksCompile(t *testing.T) {
	t.Parallel() // waits on go list; touches no process-wide state
	var blocks []goBlock
	for _, name := range docFiles(t) {
		blocks = append(blocks, goBlocks(t, name)...)
	}
	if len(blocks) < 5 {
		t.Fatalf("found %d Go blocks: the docs lost their examples, or this test its way to them", len(blocks))
	}
	known := docImports(t)
	used := map[string]bool{}
	srcs := make([]string, len(blocks))
	for i, b := range blocks {
		srcs[i] = goSource(b, known, used)
	}
	var paths []string
	for p := range used {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	imp := exportImporter(t, paths)
	for i, b := range blocks {
		t.Run(b.where, func(t *testing.T) {
			fset := token.NewFileSet()
			// A name without a directory: the //line directive's
			// path is then the markdown's as given.
			f, err := parser.ParseFile(fset, "snippet.go", srcs[i], parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("%s does not parse: %v\n%s", b.where, err, srcs[i])
			}
			var errs []string
			conf := types.Config{Importer: imp, Error: func(err error) {
				msg := err.Error()
				if strings.Contains(msg, "declared and not used") || strings.Contains(msg, "imported and not used") {
					return
				}
				errs = append(errs, msg)
			}}
			conf.Check("snippet", fset, []*ast.File{f}, nil)
			if len(errs) > 0 {
				t.Errorf("%s does not compile:\n%s\nas\n%s", b.where, strings.Join(errs, "\n"), srcs[i])
			}
		})
	}
}

// goSource is the file b compiles as, importing each package of known it
// names (recorded in used).
func goSource(b goBlock, known map[string]string, used map[string]bool) string {
	if strings.HasPrefix(strings.TrimSpace(b.text), "package ") {
		return b.text
	}
	var src bytes.Buffer
	src.WriteString("package snippet\n\nimport (\n")
	var names []string
	for name := range known {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if regexp.MustCompile(`\b` + name + `\.`).MatchString(b.given + "\n" + b.text) {
			fmt.Fprintf(&src, "\t%s %q\n", name, known[name])
			used[known[name]] = true
		}
	}
	// The line directive makes errors point at the markdown's lines.
	file, line, _ := strings.Cut(b.where, ":")
	fmt.Fprintf(&src, ")\n\nfunc _(%s) {\n//line %s:%s\n%s}\n", b.given, file, nextLine(line), b.text)
	return src.String()
}

// nextLine is the line after the fence, where a block's text starts.
func nextLine(fence string) string {
	var n int
	fmt.Sscan(fence, &n)
	return fmt.Sprint(n + 1)
}

// exportImporter returns an importer that reads the export data `go list
// -export` builds for paths and their dependencies.
func exportImporter(t *testing.T, paths []string) types.Importer {
	t.Helper()
	if len(paths) == 0 {
		return importer.Default()
	}
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v: %s", err, stderr.String())
	}
	export := map[string]string{}
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if p, f, ok := strings.Cut(l, "\t"); ok && f != "" {
			export[p] = f
		}
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := export[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
}

// The Go blocks' reading: the given marker, and a block without one.
func TestDocsGoBlocksMarkers(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "a.md")
	os.WriteFile(md, []byte("<!-- go: given ctx context.Context -->\n```go\nx := 1\n```\ntext\n```go\ny := 2\n```\n```sh\nz\n```\n"), 0o644)
	got := goBlocks(t, md)
	if len(got) != 2 || got[0].given != "ctx context.Context" || got[0].text != "x := 1\n" || got[1].given != "" || !strings.HasSuffix(got[1].where, "a.md:6") {
		t.Fatalf("blocks %+v", got)
	}
	used := map[string]bool{}
	src := goSource(got[0], map[string]string{"context": "context", "http": "net/http"}, used)
	if !strings.Contains(src, "\tcontext \"context\"\n") || strings.Contains(src, "net/http") || !used["context"] {
		t.Fatalf("source %s", src)
	}
}
