package strictyaml

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/safefile"
)

func TestDecodeRefusesWhatItCannotReadStrictly(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string // the whole error; "" for none
		is   error
	}{
		{"empty file", "", "", nil},
		{"only comments", "# nothing\n", "", nil},
		{"one document", "a: 1\n", "", nil},
		{"trailing empty document", "a: 1\n---\n", "", nil},
		{"trailing null document", "a: 1\n--- ~\n", "", nil},
		{"second document", "a: 1\n---\nb: 2\n", "f.yaml:2:1: config: a second YAML document (after ---): a file holds one document", nil},
		{"syntax error, at the line at fault", "a:\n  b: 1\n c: [\n", "f.yaml:3: config: invalid YAML: did not find expected key", nil},
		{"unknown anchor", "a: *nope\n", "f.yaml:1: config: invalid YAML: unknown anchor 'nope' referenced", nil},
		{"alias inside the node it names", "a: &x [1, *x]\n", "f.yaml:1:11: config: alias *x is inside the node it names", ErrCycle},
		{"alias inside a mapping it names", "a: &x {b: {c: *x}}\n", "f.yaml:1:15: config: alias *x is inside the node it names", ErrCycle},
		{"over the size cap", strings.Repeat("#", MaxBytes+1), fmt.Sprintf("f.yaml: config: the file is %d bytes, over the limit of %d", MaxBytes+1, MaxBytes), safefile.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("f.yaml", []byte(tt.data))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Decode: %v", err)
			case tt.want == "":
				return
			case err == nil:
				t.Fatalf("Decode succeeded, want %q", tt.want)
			case err.Error() != tt.want:
				t.Errorf("Decode error\n got %q\nwant %q", err, tt.want)
			}
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Errorf("error %T is not an *Error", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
		})
	}
}

// laughs returns a document whose last alias expands to 10^levels
// scalars, in few bytes.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestDecodeCountsAliasesAgainstTheBudget(t *testing.T) {
	data := laughs(9)
	_, err := Decode("f.yaml", []byte(data))
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("a billion laughs: %v, want ErrBudget", err)
	}
	if e, _ := errors.AsType[*Error](err); e.Line != 4 || e.Column != 25 {
		t.Errorf("error at %d:%d, want 4:25 (the fourth alias of l3 takes it past 4666): %v", e.Line, e.Column, err)
	}

	// A list of n scalars aliased k times: literal n+1 nodes plus k
	// aliases of n+1 nodes each, against a budget of the file's bytes
	// plus 4096. The boundary is exact.
	file := func(n, k int) []byte {
		var b strings.Builder
		b.WriteString("a: &a [" + strings.Repeat("x,", n) + "]\nb: [")
		b.WriteString(strings.Repeat("*a,", k))
		b.WriteString("]\n")
		return []byte(b.String())
	}
	const n = 1000
	// nodes: mapping 1 + a: key 1 + list n+1 + b: key 1 + list 1 + k aliases × (n+1)
	for k := 1; ; k++ {
		data := file(n, k)
		nodes := 1 + 1 + (n + 1) + 1 + 1 + k*(n+1)
		_, err := Decode("f.yaml", data)
		if over := nodes > Budget(len(data)); over != errors.Is(err, ErrBudget) {
			t.Fatalf("k=%d: %d nodes, budget %d: error %v", k, nodes, Budget(len(data)), err)
		}
		if err != nil {
			if k < 3 {
				t.Fatalf("k=%d: refused a file that reuses an anchor a few times: %v", k, err)
			}
			break
		}
	}
}

func TestPairs(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string // keys=values in order, or the error
	}{
		{"plain", "m: {a: 1, b: 2}\n", "a=1 b=2"},
		{"merge yields to explicit keys", "base: &b {x: 1, y: 2}\nm: {<<: *b, y: 3}\n", "y=3 x=1"},
		{"earlier merges win", "p: &p {x: 1}\nq: &q {x: 2, z: 3}\nm: {<<: [*p, *q]}\n", "x=1 z=3"},
		{"nested merges", "p: &p {x: 1}\nq: &q {<<: *p, y: 2}\nm: {<<: *q}\n", "y=2 x=1"},
		{"merge into a large mapping", "b: &b {y: 1, z: 2}\nm: {<<: *b, a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1, y: 3}\n", "a=1 b=1 c=1 d=1 e=1 f=1 g=1 h=1 i=1 y=3 z=2"},
		{"duplicate in a large mapping", "m: {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1, a: 3}\n", "f.yaml:1:59: config: duplicate key \"a\" in m (first at line 1)"},
		{"one mapping merged twice", "p: &p {x: 1}\nm: {<<: [*p, *p]}\n", "x=1"},
		{"alias key", "k: &k name\nm: {*k : v}\n", "name=v"},
		{"duplicate", "m:\n  a: 1\n  b: 2\n  a: 3\n", "f.yaml:4:3: config: duplicate key \"a\" in m (first at line 2)"},
		{"duplicate beside a merge is allowed", "p: &p {a: 1}\nm: {a: 2, <<: *p}\n", "a=2"},
		{"non-scalar key", "m: {[a]: 1}\n", "f.yaml:1:5: config: a key in m must be a string, not a list"},
		{"not a mapping", "m: [1]\n", "f.yaml:1:4: config: m must be a mapping, not a list"},
		{"merge of a scalar", "m: {<<: 1}\n", "f.yaml:1:9: config: merge key << wants a mapping or a list of mappings, not \"1\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode("f.yaml", []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			top, err := d.Pairs(d.Root, "the file")
			if err != nil {
				t.Fatal(err)
			}
			m := top[len(top)-1]
			ps, err := d.Pairs(m.Value, m.Key.Value)
			var got string
			if err != nil {
				got = err.Error()
			} else {
				var kv []string
				for _, p := range ps {
					kv = append(kv, p.Key.Value+"="+Deref(p.Value).Value)
				}
				got = strings.Join(kv, " ")
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestPairsFindsADuplicateAmongManyKeys reads a mapping of 50,000 keys
// whose last repeats the first (a comparison of every pair would make
// 1.25e9 comparisons here).
func TestPairsFindsADuplicateAmongManyKeys(t *testing.T) {
	var b strings.Builder
	for i := range 50_000 {
		fmt.Fprintf(&b, "k%d: 1\n", i)
	}
	b.WriteString("k0: 2\n")
	d, err := Decode("f.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pairs(d.Root, "the file"); err == nil || err.Error() != `f.yaml:50001:1: config: duplicate key "k0" in the file (first at line 1)` {
		t.Errorf("Pairs: %v", err)
	}
}

func TestFieldsSuggests(t *testing.T) {
	d, err := Decode("f.yaml", []byte("unti: second\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Fields(d.Root, "rate_limit", []string{"unit", "requests_per_unit"})
	if want := `f.yaml:1:1: config: unknown key "unti" in rate_limit (did you mean "unit"?)`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if got := UnknownKey("zzzzzz", "the file", []string{"a", "b"}); got != `unknown key "zzzzzz" in the file (want one of a, b)` {
		t.Errorf("UnknownKey = %s", got)
	}
	if got := Suggest(strings.Repeat("x", 1<<20), []string{"unit"}); got != "" {
		t.Errorf("Suggest(a long key) = %q", got)
	}
}

// FuzzDecode feeds Decode arbitrary bytes: it must never panic, every
// error must be an *Error naming the file, and every mapping of what it
// accepts must read through Pairs without a panic.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("a: 1\n"))
	f.Add([]byte(laughs(3)))
	f.Add([]byte("a: &x [1, *x]\n"))
	f.Add([]byte("p: &p {x: 1}\nm: {<<: [*p, *p], x: 2, x: 3}\n"))
	f.Add([]byte("a: 1\n---\nb: 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode("fuzz.yaml", data)
		if err != nil {
			if e, ok := errors.AsType[*Error](err); !ok || e.File != "fuzz.yaml" || e.Msg == "" {
				t.Fatalf("error %T %q is not an *Error naming the file", err, err)
			}
			return
		}
		if d.Root != nil {
			d.Pairs(d.Root, "the file") // errors are fine; panics are not
		}
	})
}

// TestStringReadsNullAsEmpty checks the one reading of a string in the
// project's YAML files: a scalar as written, null in each of its forms as
// "", an alias as what it stands for, a list or a mapping not a string.
func TestStringReadsNullAsEmpty(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  string
		ok    bool
	}{
		{"~", "", true}, {"null", "", true}, {"Null", "", true}, {"", "", true},
		{`""`, "", true}, {"abc", "abc", true}, {`"~"`, "~", true}, {"500", "500", true},
		{"true", "true", true}, {"yes", "yes", true}, {"*a", "x", true},
		{"[a]", "", false}, {"{a: b}", "", false},
	} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte("a: &a x\nv: "+tt.value+"\n"), &doc); err != nil {
			t.Fatal(err)
		}
		got, ok := String(doc.Content[0].Content[3])
		if got != tt.want || ok != tt.ok {
			t.Errorf("v: %s reads as %q, %t; want %q, %t", tt.value, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := String(nil); ok {
		t.Error("String(nil) is a string")
	}
}
