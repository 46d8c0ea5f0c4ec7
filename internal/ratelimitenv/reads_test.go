package ratelimitenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readDirs are the shipped packages whose code reads environment
// variables for the sluice commands.
var readDirs = []string{
	"../../cmd/sluice", "../daemon", "../stores", "../ratelimitenv", "../telemetry",
	"../statsd", "../tracing", "../adminclient",
}

// redisPrefixes are the prefixes that internal/stores puts before the
// variables it reads by suffix (prefix+"POOL_SIZE"): the main store's and
// the per-second store's.
var redisPrefixes = []string{"REDIS_", "REDIS_PERSECOND_"}

// read is where a variable is read, and the flags whose defaults it
// feeds there.
type read struct {
	where []string
	flags []string
}

var flagName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// sourceReads returns the variable names that the code of readDirs passes
// to an environment reader (os.Getenv, os.LookupEnv, envflag's readers and
// envflag.Errs's), as string literals or constants, each with where it is
// read; a name built as prefix+"SUFFIX" (read, or named in the start-up
// line) is read under each of redisPrefixes.
func sourceReads(t *testing.T) map[string]read {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	consts := map[string]string{}
	for _, dir := range readDirs {
		paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			ast.Inspect(f, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok {
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := literal(vs.Values[i]); ok {
								consts[name.Name] = s
							}
						}
					}
				}
				return true
			})
		}
	}
	reads := map[string]read{}
	flagOf := map[ast.Expr]string{}
	add := func(e ast.Expr) {
		where := fset.Position(e.Pos()).String()
		var names []string
		switch e := e.(type) {
		case *ast.Ident:
			names = []string{consts[e.Name]}
		case *ast.SelectorExpr:
			names = []string{consts[e.Sel.Name]}
		case *ast.BinaryExpr:
			if s, ok := literal(e.Y); ok && e.Op == token.ADD {
				for _, p := range redisPrefixes {
					names = append(names, p+s)
				}
			}
		default:
			s, _ := literal(e)
			names = []string{s}
		}
		for _, n := range names {
			if envName.MatchString(n) {
				r := reads[n]
				r.where = append(r.where, where)
				if f := flagOf[e]; f != "" {
					r.flags = append(r.flags, f)
				}
				reads[n] = r
			}
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			// prefix+"POOL_SIZE": a name built by the Redis store, read
			// or named, under each of redisPrefixes.
			if b, ok := n.(*ast.BinaryExpr); ok {
				if x, ok := b.X.(*ast.Ident); ok && x.Name == "prefix" {
					add(b)
				}
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, _ := sel.X.(*ast.Ident)
			args := call.Args
			// A flag definition, fs.StringVar(&p, "name", default, usage)
			// or errs.SizeVar(fs, &p, "name", "ENV", ...): the reads in
			// its default feed -name.
			for i, a := range args {
				if s, ok := literal(a); ok && flagName.MatchString(s) && i+1 < len(args) && (strings.HasSuffix(sel.Sel.Name, "Var") || i == 0) {
					for _, d := range args[i+1:] {
						ast.Inspect(d, func(n ast.Node) bool {
							if e, ok := n.(ast.Expr); ok {
								flagOf[e] = "-" + s
							}
							return true
						})
					}
					break
				}
			}
			switch fn := sel.Sel.Name; {
			case pkg != nil && pkg.Name == "os" && (fn == "Getenv" || fn == "LookupEnv"),
				pkg != nil && pkg.Name == "envflag" && (fn == "String" || fn == "Bool"):
				add(args[0])
			case pkg != nil && pkg.Name == "envflag" && fn == "Parse":
				add(args[1])
			case fn == "Duration" || fn == "Int" || fn == "Size" || fn == "Float" || fn == "Pairs":
				if len(args) > 0 {
					add(args[0])
				}
			case fn == "SizeVar" && len(args) > 3:
				add(args[3])
			case fn == "Bools":
				for _, a := range args {
					add(a)
				}
			}
			return true
		})
	}
	return reads
}

// literal returns the value of a string literal.
func literal(e ast.Expr) (string, bool) {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		s, err := strconv.Unquote(b.Value)
		return s, err == nil
	}
	return "", false
}

// Every variable the commands' code reads by name is a row of the table,
// and a read that is the default of a flag is the row of that flag: before,
// LIMIT_RESPONSE_HEADERS_ENABLED, RUNTIME_WATCH_ROOT, NEAR_LIMIT_RATIO and
// 60 others were read and not listed.
func TestTableHoldsEveryVariableTheCodeReads(t *testing.T) {
	rows := map[string]Var{}
	for _, v := range Vars {
		rows[v.Name] = v
	}
	reads := sourceReads(t)
	if len(reads) < 100 {
		t.Fatalf("%d variables read; the scan lost its readers", len(reads))
	}
	for n, r := range reads {
		v, ok := rows[n]
		if !ok {
			t.Errorf("%s is read (%s) and not in the table", n, r.where[0])
			continue
		}
		if len(r.flags) > 0 && !slices.Contains(r.flags, v.Flag) {
			t.Errorf("%s feeds %v (%s); the table says %q", n, r.flags, r.where[0], v.Flag)
		}
	}
}
