// Package strictyaml reads a YAML configuration file strictly and within
// bounds. It is the one reader of the project's YAML formats: the descriptor
// config and the proxy file both decode through it.
//
// Strictly: a file holds one document; a key appears once in a mapping; an
// unknown key is an error with a "did you mean" suggestion; every error is
// an *Error that names the file, the line and the column.
//
// Within bounds: the work of reading a file is proportional to its bytes.
// A file is at most MaxBytes long. Aliases are counted against the same
// budget as literal content: the document, with every alias replaced by
// what it names each time it is used, may hold at most Budget(len(data))
// nodes, so a small file cannot stand for a large one (a "billion laughs"
// or a list anchored once and aliased by every rule). An alias that names
// a node containing itself is refused. Duplicate keys are found with a map,
// in time linear in the mapping's size.
//
// The parsers above it walk the returned yaml.v3 nodes; as long as their
// work per node is bounded, the budget bounds their work too.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/safefile"
)

// MaxBytes is the largest file Decode reads, 1 MiB: ten times the largest
// rate limit config we have seen. Literal YAML costs yaml.v3 up to about
// 250 bytes of heap per byte of input (a flow mapping of one-letter keys
// holds a node per byte), so this cap is also what bounds the memory of
// reading a file. Loaders read files under the same cap.
const MaxBytes = 1 << 20

// MaxMergeDepth bounds how deeply merge keys (<<) may nest.
const MaxMergeDepth = 64

// Budget returns the most nodes a document of size bytes may expand to,
// aliases expanded each time they are used: one per byte, plus 4096 so that
// a small file may still reuse a few anchors. Literal content alone stays
// within it (a YAML node takes at least a byte); only aliases can exceed it.
func Budget(size int) int { return size + 4096 }

// ErrBudget is wrapped by the error for a document whose aliases expand it
// beyond its Budget.
var ErrBudget = errors.New("aliases expand the document beyond its node budget")

// ErrCycle is wrapped by the error for an alias inside the node it names.
var ErrCycle = errors.New("alias inside the node it names")

// Error is an error in a config file: the file, the position in it and
// what is wrong. Its message reads like a compiler's,
// "file:line:col: config: what", so that editors and terminals can jump to
// it. The zero value is an error with an empty message and no position.
type Error struct {
	// File is the file name, as given to Decode or found by a loader.
	File string
	// Line and Column are 1-based; 0 when unknown (an unreadable file, a
	// duplicate found only when files are combined).
	Line, Column int
	// Msg says what is wrong, in lower case.
	Msg string
	// Err is the underlying error, if any: a YAML syntax error, ErrBudget,
	// ErrCycle, safefile.ErrTooLarge, an I/O error or a validation error.
	Err error
}

// Error returns "file:line:col: config: msg", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteByte(':')
		if e.Column > 0 {
			b.WriteString(strconv.Itoa(e.Column))
			b.WriteByte(':')
		}
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString("config: ")
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error, or nil.
func (e *Error) Unwrap() error { return e.Err }

// Doc is one decoded document. Its methods read the document's mappings
// strictly; they do not modify it. A Doc is safe for concurrent reads. The
// zero Doc has no root and names no file.
type Doc struct {
	// File is the file name used in errors.
	File string
	// Root is the document's top node, or nil when the file holds no
	// document (it is empty or only comments).
	Root *yaml.Node
}

// Decode reads data, the contents of file, as one YAML document. It
// refuses data over MaxBytes (wrapping safefile.ErrTooLarge), a syntax
// error (at the line at fault), a second document that holds anything (an
// empty one, such as a trailing "---", is harmless), an alias inside the
// node it names (ErrCycle) and a document whose aliases expand it beyond
// Budget(len(data)) nodes (ErrBudget). Every error is an *Error naming
// file. Decode never panics, and its work is linear in len(data).
func Decode(file string, data []byte) (*Doc, error) {
	if len(data) > MaxBytes {
		return nil, &Error{File: file, Msg: fmt.Sprintf("the file is %d bytes, over the limit of %d", len(data), MaxBytes),
			Err: fmt.Errorf("%w: %d bytes, limit %d", safefile.ErrTooLarge, len(data), MaxBytes)}
	}
	d := &Doc{File: file}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return d, nil
		}
		return nil, SyntaxError(file, data, err)
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, SyntaxError(file, data, err)
		}
		if len(next.Content) > 0 && !IsNull(next.Content[0]) {
			return nil, d.Errorf(&next, "a second YAML document (after ---): a file holds one document")
		}
	}
	d.Root = &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		d.Root = doc.Content[0]
	}
	if err := d.checkBudget(len(data)); err != nil {
		return nil, err
	}
	return d, nil
}

// Errorf returns an *Error at n's position (none if n is nil) in d's file.
func (d *Doc) Errorf(n *yaml.Node, format string, args ...any) *Error {
	e := &Error{File: d.File, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// checkBudget walks the document once, counting each literal node once and
// each alias as the expanded size of what it names, and refuses it at the
// alias that takes the count past the Budget of a file of size bytes.
func (d *Doc) checkBudget(size int) error {
	budget := Budget(size)
	s := sizer{limit: budget + 1, memo: make(map[*yaml.Node]int), active: make(map[*yaml.Node]bool)}
	total := 0
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		if n.Kind == yaml.AliasNode {
			size, cycle := s.size(n)
			if cycle != nil {
				return &Error{File: d.File, Line: cycle.Line, Column: cycle.Column, Err: ErrCycle,
					Msg: fmt.Sprintf("alias *%s is inside the node it names", cycle.Value)}
			}
			total += size
		} else {
			total++
		}
		if total > budget {
			what := "the document"
			if n.Kind == yaml.AliasNode {
				what = "alias *" + n.Value
			}
			return &Error{File: d.File, Line: n.Line, Column: n.Column, Err: ErrBudget,
				Msg: fmt.Sprintf("%s expands the document past %d nodes (a file of %d bytes may hold one node per byte plus 4096, an alias counting as what it names each time it is used)", what, budget, size)}
		}
		if n.Kind == yaml.AliasNode {
			return nil
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if d.Root == nil {
		return nil
	}
	return walk(d.Root)
}

// sizer computes expanded sizes: the nodes of a tree with every alias
// replaced by what it names. Sizes of anchored nodes are memoized, so that
// a node aliased many times is walked once; sizes saturate at limit.
type sizer struct {
	limit  int
	memo   map[*yaml.Node]int
	active map[*yaml.Node]bool // anchored nodes being sized: an alias to one is a cycle
}

// size returns n's expanded size, or the alias that is inside the node it
// names.
func (s *sizer) size(n *yaml.Node) (int, *yaml.Node) {
	if n.Kind == yaml.AliasNode {
		t := n.Alias
		if t == nil {
			return 1, nil
		}
		if s.active[t] {
			return 0, n
		}
		return s.size(t)
	}
	if n.Anchor != "" {
		if v, ok := s.memo[n]; ok {
			return v, nil
		}
		s.active[n] = true
		defer delete(s.active, n)
	}
	total := 1
	for _, c := range n.Content {
		v, cycle := s.size(c)
		if cycle != nil {
			return 0, cycle
		}
		total = min(total+v, s.limit)
	}
	if n.Anchor != "" {
		s.memo[n] = total
	}
	return total, nil
}

// Pair is one key: value pair of a mapping. Key is a scalar (aliases
// followed); Value is as written, possibly an alias.
type Pair struct{ Key, Value *yaml.Node }

// Pairs returns the pairs of mapping n (an alias is followed), after
// checking that every key is a scalar and that none appears twice. The
// pairs of merged mappings (<<: *m or <<: [*a, *b]) come after the
// explicit ones and yield to them and to earlier merges, as YAML
// specifies; each merged mapping is expanded once however many aliases
// name it. where names the block in errors ("rate_limit"). Pairs takes
// time linear in the pairs it reads.
func (d *Doc) Pairs(n *yaml.Node, where string) ([]Pair, error) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, d.Errorf(n, "%s must be a mapping, not %s", where, Kind(n))
	}
	m := merger{d: d, where: where, out: make([]Pair, 0, len(n.Content)/2)}
	if err := m.add(n, 0); err != nil {
		return nil, err
	}
	return m.out, nil
}

// smallMapping is the most pairs a mapping may have for its keys to be
// compared by scanning rather than with a map: most mappings of a config
// have a handful of keys, and a map per mapping would double the cost of
// reading them.
const smallMapping = 8

// merger collects the pairs of a mapping and of the mappings it merges.
type merger struct {
	d      *Doc
	where  string
	out    []Pair
	seen   map[string]bool     // keys of out, once out is larger than smallMapping
	merged map[*yaml.Node]bool // mappings already merged
}

// has reports whether out has key k.
func (m *merger) has(k string) bool {
	if m.seen != nil {
		return m.seen[k]
	}
	for _, p := range m.out {
		if p.Key.Value == k {
			return true
		}
	}
	return false
}

// push appends a pair whose key out does not have.
func (m *merger) push(p Pair) {
	m.out = append(m.out, p)
	switch {
	case m.seen != nil:
		m.seen[p.Key.Value] = true
	case len(m.out) > smallMapping:
		m.seen = make(map[string]bool, 2*len(m.out))
		for _, p := range m.out {
			m.seen[p.Key.Value] = true
		}
	}
}

func (m *merger) add(n *yaml.Node, depth int) error {
	if depth > MaxMergeDepth {
		return m.d.Errorf(n, "merge keys nested deeper than %d", MaxMergeDepth)
	}
	var merges []*yaml.Node
	var explicit map[string]*yaml.Node // n's keys, when n is not small
	if len(n.Content)/2 > smallMapping {
		explicit = make(map[string]*yaml.Node, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return m.d.Errorf(k, "a key in %s must be a string, not %s", m.where, Kind(k))
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if first := m.explicitKey(n, i, k.Value, explicit); first != nil {
			return m.d.Errorf(k, "duplicate key %q in %s (first at line %d)", k.Value, m.where, first.Line)
		}
		if explicit != nil {
			explicit[k.Value] = k
		}
		if !m.has(k.Value) { // else merged from above: the first one wins
			m.push(Pair{k, v})
		}
	}
	for _, v := range merges {
		v = Deref(v)
		srcs := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			srcs = v.Content
		}
		for _, s := range srcs {
			s = Deref(s)
			if s.Kind != yaml.MappingNode {
				return m.d.Errorf(s, "merge key << wants a mapping or a list of mappings, not %s", Kind(s))
			}
			if m.merged[s] {
				continue
			}
			if m.merged == nil {
				m.merged = make(map[*yaml.Node]bool)
			}
			m.merged[s] = true
			if err := m.add(s, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// explicitKey returns the key node of mapping n before index i that is k,
// or nil: from explicit when n is large, else by scanning.
func (m *merger) explicitKey(n *yaml.Node, i int, k string, explicit map[string]*yaml.Node) *yaml.Node {
	if explicit != nil {
		return explicit[k]
	}
	for j := 0; j < i; j += 2 {
		if prev := Deref(n.Content[j]); prev.Kind == yaml.ScalarNode && prev.ShortTag() != "!!merge" && prev.Value == k {
			return prev
		}
	}
	return nil
}

// Fields is Pairs, then every key must be one of allowed; an unknown key is
// an error at the key that says what was meant (see UnknownKey).
func (d *Doc) Fields(n *yaml.Node, where string, allowed []string) ([]Pair, error) {
	ps, err := d.Pairs(n, where)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if !contains(allowed, p.Key.Value) {
			return nil, d.Errorf(p.Key, "%s", UnknownKey(p.Key.Value, where, allowed))
		}
	}
	return ps, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// UnknownKey explains an unknown key k of block where: `unknown key "k" in
// where`, followed by the likely intended key (Suggest) or by the list of
// allowed keys.
func UnknownKey(k, where string, allowed []string) string {
	msg := fmt.Sprintf("unknown key %q in %s", k, where)
	if s := Suggest(k, allowed); s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + " (want one of " + strings.Join(allowed, ", ") + ")"
}

// Deref follows aliases to the node they stand for. It returns nil for nil.
func Deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is a null scalar (null, ~ or nothing).
func IsNull(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// String reads n (aliases followed) as a string, by the one rule of the
// project's YAML files, which is how envoyproxy/ratelimit's YAML reader
// (gopkg.in/yaml.v2) fills a string field: a scalar's text as written, so
// that 500 and true are the strings "500" and "true"; null (null, ~ or
// nothing) is "", which a free-text field (a name, a path) reads as it
// reads the key left out, but a key whose value is one of a set
// (algorithm, path_semantics, headers, missing_key, ...) refuses as it
// refuses "", in the rate limit config and the proxy file alike: null is
// not a way to ask for a default. A list or a mapping is not a string: ok
// is false. A nil n is not a string either.
func String(n *yaml.Node) (s string, ok bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	if IsNull(n) {
		return "", true
	}
	return n.Value, true
}

// Bool reads n (aliases followed) as a boolean, by the one rule of the
// project's YAML files, which is how envoyproxy/ratelimit's YAML 1.1
// reader (gopkg.in/yaml.v2) fills a boolean field: true and false in any
// of their YAML 1.2 case forms, and the plain (unquoted) YAML 1.1 forms y,
// yes, on, n, no and off (Y, Yes, YES, ...); null is false, as an absent
// key is. A quoted string, a number, a list or a mapping is not a boolean:
// ok is false.
func Bool(n *yaml.Node) (b, ok bool) {
	n = Deref(n)
	if n == nil || IsNull(n) {
		return false, n != nil
	}
	if n.Kind != yaml.ScalarNode {
		return false, false
	}
	if n.ShortTag() == "!!bool" {
		err := n.Decode(&b)
		return b, err == nil
	}
	if n.Style != 0 || n.ShortTag() != "!!str" {
		return false, false
	}
	switch n.Value {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
		return true, true
	case "n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return false, true
	}
	return false, false
}

// IsYAML11Bool reports whether n is a plain scalar that YAML 1.1 reads as
// a boolean and YAML 1.2 as a string (yes, on, n, ...): what Bool reads
// as a boolean where a boolean is wanted, and what a value of no schema
// (a descriptor's metadata) must choose between.
func IsYAML11Bool(n *yaml.Node) bool {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || n.Style != 0 {
		return false
	}
	_, ok := Bool(n)
	return ok
}

// Kind names what n is, for error messages: "a mapping", "a list",
// "nothing" (null) or a scalar's quoted text.
func Kind(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// Suggest returns the candidate closest to s, if it is close enough to be a
// likely typo (an edit distance under 3), else "".
func Suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := distance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes. Keys
// longer than maxDistanceLen are compared by their first maxDistanceLen
// bytes, so that a hostile key costs bounded work.
func distance(a, b string) int {
	const maxDistanceLen = 256
	a, b = a[:min(len(a), maxDistanceLen)], b[:min(len(b), maxDistanceLen)]
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// yamlLine matches the syntax errors of gopkg.in/yaml.v3, which carry the
// line in their text only.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// maxRelocate is the largest input whose syntax errors SyntaxError places
// by re-parsing prefixes (about log2(lines) parses); above it, yaml.v3's own
// line is kept, so that a broken file costs about as much to read as one
// at the size cap.
const maxRelocate = 64 << 10

// SyntaxError turns an error of gopkg.in/yaml.v3 decoding data, the
// contents of file, into an *Error with the line at fault.
//
// yaml.v3 often reports the line where the enclosing block starts, or the
// line before it, rather than the line at fault. So, for files up to 64 KiB
// (hand-written ones), the line is found again: the first line whose addition turns a prefix of
// data that parses into one that does not, by binary search over line
// boundaries. yaml.v3's own line is the fallback.
func SyntaxError(file string, data []byte, err error) *Error {
	msg := err.Error()
	e := &Error{File: file, Err: err}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if len(data) <= maxRelocate {
		if l := firstBadLine(data); l > 0 {
			e.Line = l
		}
	}
	e.Msg = "invalid YAML: " + msg
	return e
}

// firstBadLine returns the 1-based line n such that the first n-1 lines of
// data parse and the first n do not, or 0 if it finds none.
func firstBadLine(data []byte) int {
	var ends []int // ends[i] is the end of line i+1, after its newline
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	if syntaxOK(data) {
		return 0
	}
	// Invariant: the first lo lines parse (0 lines always do), the first
	// hi do not.
	lo, hi := 0, len(ends)
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if syntaxOK(data[:ends[mid-1]]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// syntaxOK reports whether every YAML document in data parses.
func syntaxOK(data []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			return errors.Is(err, io.EOF)
		}
	}
}
