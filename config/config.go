package config

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/safefile"
	"github.com/sluicehq/sluice/internal/strictyaml"
)

// Config is a loaded config: a set of domains, each a descriptor tree. It is
// immutable and safe for concurrent use. A nil *Config has no domains.
type Config struct {
	domains map[string]*Domain
	sorted  []*Domain // by name
	// only is the one domain of a Config of one domain, which Lookup
	// finds by comparing its name, not through the map: a hash and a map
	// probe, about 60 of a decision's instructions (BENCHMARKS.md, "Cost
	// per decision"). nil when there are none or several.
	only *Domain
}

// Domain is one domain's compiled descriptor tree, the content of one file.
// It is immutable and safe for concurrent use.
type Domain struct {
	// Name is the domain, as in the file's domain key.
	Name string
	// File is the name of the file the domain came from, as given to Parse.
	File string
	// Line is the line of the domain key in File.
	Line int
	// ForwardAuth is the domain's forward_auth section (a Sluice
	// extension), or nil when it has none.
	ForwardAuth *ForwardAuth
	// RLQS is the domain's rlqs section (a Sluice extension: how the rate
	// limit quota service divides its rules), or nil for the defaults.
	RLQS *RLQS
	// MaxLogEntries is the file's max_log_entries: the most entries one
	// key of a sliding_log rule may hold at worst (sluice.Limit.LogEntries,
	// 16 bytes each). A rule above it is refused at its line unless its
	// precision brings it within. DefaultMaxLogEntries when the file does
	// not set it.
	MaxLogEntries int
	// Warnings are what the file holds that envoyproxy/ratelimit accepts
	// and that changes nothing, or that Sluice reads as envoyproxy/ratelimit
	// reads it although the file is ambiguous: each names the file, line
	// and column, for the loader to log. nil when there are none.
	Warnings []*Error

	root  level
	rules int
}

// level is one list of descriptors: a domain's top level or a descriptor's
// children. nodes keeps config order (for Dump and for the order in which
// wildcards are tried); the maps index it for Lookup.
type level struct {
	nodes    []*node
	exact    map[Entry]*node  // key and a literal value
	wild     []*node          // key and a value with '*', in config order
	wildByKV map[Entry]*node  // wild by key and value, for find
	keyOnly  map[string]*node // key and no value
}

// node is one configured descriptor.
type node struct {
	PathEntry
	pat      pattern    // compiled Value when Wildcard
	limit    *RateLimit // nil: no rate_limit
	children level
	line     int
}

// pattern is a compiled wildcard value: the literal parts between the '*'s,
// at least two of them.
type pattern []string

// compile compiles a value that contains at least one '*'.
func compile(value string) pattern { return strings.Split(value, "*") }

// match reports whether s matches p, each '*' standing for any run of
// characters. It does not allocate.
func (p pattern) match(s string) bool {
	first, last := p[0], p[len(p)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, mid := range p[1 : len(p)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return true
}

// pick returns the descriptor that entry e selects at this level: exact
// key and value, else the first matching wildcard, else key only.
func (lv *level) pick(e Entry) *node {
	// A level without literal values has no exact map: not asking it
	// saves the map call (about 25 of a decision's instructions,
	// BENCHMARKS.md, "Cost per decision").
	if lv.exact != nil {
		if n := lv.exact[e]; n != nil {
			return n
		}
	}
	for _, n := range lv.wild {
		if n.Key == e.Key && n.pat.match(e.Value) {
			return n
		}
	}
	return lv.keyOnly[e.Key]
}

// find returns the descriptor configured with exactly key and value, or nil,
// in constant time (a file may list many wildcards at one level).
func (lv *level) find(key, value string) *node {
	if value == "" {
		return lv.keyOnly[key]
	}
	if n := lv.exact[Entry{key, value}]; n != nil {
		return n
	}
	return lv.wildByKV[Entry{key, value}]
}

// add adds n, which find has shown to be new.
func (lv *level) add(n *node) {
	lv.nodes = append(lv.nodes, n)
	switch {
	case n.Value == "":
		if lv.keyOnly == nil {
			lv.keyOnly = make(map[string]*node)
		}
		lv.keyOnly[n.Key] = n
	case n.Wildcard:
		lv.wild = append(lv.wild, n)
		if lv.wildByKV == nil {
			lv.wildByKV = make(map[Entry]*node)
		}
		lv.wildByKV[Entry{n.Key, n.Value}] = n
	default:
		if lv.exact == nil {
			lv.exact = make(map[Entry]*node)
		}
		lv.exact[Entry{n.Key, n.Value}] = n
	}
}

// Lookup returns the rule that applies to a request descriptor of domain
// with the given entries, or nil when the domain is unknown or no rule
// matches (see the package documentation for the matching rules). It does
// not allocate. The result belongs to c and must not be modified.
func (c *Config) Lookup(domain string, entries []Entry) *RateLimit {
	if c == nil {
		return nil
	}
	d := c.only
	if d == nil {
		d = c.domains[domain]
	} else if d.Name != domain {
		return nil
	}
	if d == nil {
		return nil
	}
	return d.Lookup(entries)
}

// Lookup returns the rule of d that applies to a request descriptor with
// the given entries, or nil. It does not allocate.
func (d *Domain) Lookup(entries []Entry) *RateLimit {
	if len(entries) == 0 {
		return nil
	}
	lv := &d.root
	for _, e := range entries[:len(entries)-1] {
		n := lv.pick(e)
		if n == nil {
			return nil
		}
		lv = &n.children
	}
	if n := lv.pick(entries[len(entries)-1]); n != nil {
		return n.limit
	}
	return nil
}

// Rules returns the number of rate_limit blocks in d.
func (d *Domain) Rules() int { return d.rules }

// Options are the choices of how files combine into a Config. The zero
// Options is what New, Load and LoadContext use.
type Options struct {
	// MergeDomains merges the files of one domain into one domain, as
	// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true does: their
	// top-level descriptors are put together, and one key and value at the
	// top level of two of them is an error naming both places. Each file
	// is still parsed alone, so a replaces names a rule of its own file.
	// false: two files of one domain are an error.
	MergeDomains bool
}

// New combines domains into a Config. Two domains with the same name are an
// error, and so are two domains with a forward_auth section: the
// forward-auth endpoint serves one domain.
func New(domains ...*Domain) (*Config, error) { return Options{}.New(domains...) }

// New combines domains into a Config as the package-level New does, with
// the choices of o.
func (o Options) New(domains ...*Domain) (*Config, error) {
	c := &Config{domains: make(map[string]*Domain, len(domains))}
	var auth *ForwardAuth
	for _, d := range domains {
		prev := c.domains[d.Name]
		if prev != nil && !o.MergeDomains {
			return nil, &Error{File: d.File, Line: d.Line, Msg: fmt.Sprintf("duplicate domain %q (also in %s:%d)", d.Name, prev.File, prev.Line)}
		}
		if fa := d.ForwardAuth; fa != nil {
			if auth != nil {
				return nil, &Error{File: fa.File, Line: fa.Line, Msg: fmt.Sprintf(
					"a second forward_auth, in domain %q (the first is domain %q's, at %s:%d): one domain at most has one, since /auth serves one domain",
					d.Name, auth.Domain, auth.File, auth.Line)}
			}
			auth = fa
		}
		if prev == nil {
			c.domains[d.Name] = d
			c.sorted = append(c.sorted, d)
			continue
		}
		merged, err := merge(prev, d)
		if err != nil {
			return nil, err
		}
		c.domains[d.Name] = merged
		c.sorted[slices.Index(c.sorted, prev)] = merged
	}
	slices.SortFunc(c.sorted, func(a, b *Domain) int { return strings.Compare(a.Name, b.Name) })
	if len(c.sorted) == 1 {
		c.only = c.sorted[0]
	}
	return c, nil
}

// merge returns a domain with the top-level descriptors of a and then
// b, and the forward_auth of either; a and b are not changed.
func merge(a, b *Domain) (*Domain, error) {
	m := &Domain{Name: a.Name, File: a.File, Line: a.Line, ForwardAuth: cmp.Or(a.ForwardAuth, b.ForwardAuth), rules: a.rules + b.rules,
		Warnings: slices.Concat(a.Warnings, b.Warnings)}
	var err error
	if m.RLQS, err = mergeRLQS(a, b); err != nil {
		return nil, err
	}
	for _, n := range a.root.nodes {
		m.root.add(n)
	}
	for _, n := range b.root.nodes {
		if prev := a.root.find(n.Key, n.Value); prev != nil {
			return nil, &Error{File: b.File, Line: n.line, Msg: fmt.Sprintf(
				"duplicate descriptor: key %q value %q of domain %q is already at %s:%d (files of one domain are merged)", n.Key, n.Value, a.Name, a.File, prev.line)}
		}
		m.root.add(n)
	}
	return m, nil
}

// Files returns the files Load reads for path: path itself, or the entries
// of the directory path named *.yaml or *.yml that are not dot files, in
// name order. A watcher uses it to know what to watch. An entry that is not
// a regular file (after following symlinks), such as a directory named
// x.yaml, is listed, and Load refuses it.
func Files(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	return dirFiles(path)
}

// dirFiles lists the config files of directory dir. It reads the directory
// only, never an entry, so a FIFO or a device among them cannot block it.
func dirFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		name := e.Name()
		ext := filepath.Ext(name)
		if strings.HasPrefix(name, ".") || ext != ".yaml" && ext != ".yml" {
			continue
		}
		files = append(files, filepath.Join(dir, name))
	}
	return files, nil
}

// LoadTimeout is how long Load may take to read a config's files.
const LoadTimeout = 10 * time.Second

// MaxFileBytes is the largest config file Load and Parse accept, 1 MiB:
// about ten times the largest rate limit config we have seen, and what
// bounds the memory of reading one (see the package documentation).
const MaxFileBytes = strictyaml.MaxBytes

// MaxTotalBytes bounds a config as a whole, all its files together: 16
// MiB, far above any real set of rules, so that a directory of many files
// each under MaxFileBytes cannot make LoadContext read, parse and hold an
// unbounded amount of YAML.
const MaxTotalBytes = 16 << 20

// Load is LoadContext with a deadline of LoadTimeout.
func Load(path string) (*Config, error) { return Options{}.Load(path) }

// Load is the package-level Load with the choices of o.
func (o Options) Load(path string) (*Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), LoadTimeout)
	defer cancel()
	return o.LoadContext(ctx, path)
}

// LoadContext is the package-level LoadContext with the choices of o.
func (o Options) LoadContext(ctx context.Context, path string) (*Config, error) {
	return o.loadContext(ctx, path)
}

// LoadContext reads a config from path: a YAML file, or a directory whose
// *.yaml and *.yml files (not those whose names start with '.') each hold
// one domain. A directory without such files is an error.
//
// Every file must be a regular file (symlinks are followed) of at most
// MaxFileBytes: a directory, FIFO, socket or device named
// *.yaml is refused, without blocking, with an error that wraps
// safefile.ErrNotRegular, and a larger file with one that wraps
// safefile.ErrTooLarge and states its size. All the files together may
// hold at most MaxTotalBytes: LoadContext reads them all before parsing
// any and refuses a config over that total with an error naming path,
// the total and the limit. LoadContext gives up when ctx
// ends. Errors are *Error values that name the file, and the line where
// there is one.
func LoadContext(ctx context.Context, path string) (*Config, error) {
	return Options{}.loadContext(ctx, path)
}

func (o Options) loadContext(ctx context.Context, path string) (*Config, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read: " + unwrapPath(err, path), Err: err}
	}
	files := []string{path}
	if fi.IsDir() {
		if files, err = dirFiles(path); err != nil {
			return nil, &Error{File: path, Msg: "cannot read directory: " + unwrapPath(err, path), Err: err}
		}
		if len(files) == 0 {
			return nil, &Error{File: path, Msg: "no .yaml or .yml files in directory"}
		}
	}
	// Read every file before parsing any, so that the total is bounded
	// by what is parsed, and a config over MaxTotalBytes is refused
	// having held at most MaxTotalBytes+MaxFileBytes of it.
	datas := make([][]byte, len(files))
	total := 0
	for i, f := range files {
		data, err := safefile.Read(ctx, f, MaxFileBytes)
		if err != nil {
			return nil, &Error{File: f, Msg: "cannot read: " + unwrapPath(err, f), Err: err}
		}
		if total += len(data); total > MaxTotalBytes {
			return nil, &Error{File: path, Msg: fmt.Sprintf("%d bytes in all in the first %d of %d files (up to %s), over the limit of %d: split the rules over fewer, smaller files",
				total, i+1, len(files), filepath.Base(f), MaxTotalBytes)}
		}
		datas[i] = data
	}
	domains := make([]*Domain, 0, len(files))
	for i, f := range files {
		d, err := Parse(f, datas[i])
		datas[i] = nil
		if err != nil {
			return nil, err
		}
		domains = append(domains, d)
	}
	return o.New(domains...)
}

// unwrapPath returns err's message without the path, which the *Error
// names already.
func unwrapPath(err error, path string) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return strings.TrimPrefix(err.Error(), path+": ")
}

// Domain returns the domain named name, or nil.
func (c *Config) Domain(name string) *Domain {
	if c == nil {
		return nil
	}
	return c.domains[name]
}

// Domains returns the domains, sorted by name.
func (c *Config) Domains() []*Domain {
	if c == nil {
		return nil
	}
	return slices.Clone(c.sorted)
}

// Warnings returns the Warnings of every domain, the domains sorted by
// name; nil when there are none (and for a nil Config).
func (c *Config) Warnings() []*Error {
	if c == nil {
		return nil
	}
	var ws []*Error
	for _, d := range c.sorted {
		ws = append(ws, d.Warnings...)
	}
	return ws
}

// Dump writes the compiled trees of every domain, sorted by name, in a
// readable form; see (*Domain).Dump. Write errors are ignored.
func (c *Config) Dump(w io.Writer) {
	if c == nil {
		return
	}
	for _, d := range c.sorted {
		d.Dump(w)
	}
}

// Dump writes d's compiled tree: a line for the domain, then one line per
// descriptor, indented by depth, as key or key=value, followed by its rule
// (the sluice.Limit, "unlimited" or "blocked") and its flags in brackets;
// then, when the domain has a forward_auth section, a line for it (its
// place and trusted proxies) and one line per descriptor it builds, each
// entry as key=<source>, a literal as its quoted value:
//
//	domain shop (shop.yaml)
//	  remote_address: fixed_window 10/1s
//	  remote_address=192.0.2.7: blocked (0 per second)
//	  path=/api/* [share_threshold]
//	    user: token_bucket 100/5m0s burst 20 (100 per 5 minutes) [name=api_user shadow_mode failure_mode=closed]
//	forward_auth shop (shop.yaml:24) trusted_proxies 10.0.0.0/8
//	  remote_address=<client_ip>
//	  path=<path>, user=<header:X-User>
//
// Write errors are ignored.
func (d *Domain) Dump(w io.Writer) {
	var b strings.Builder
	b.WriteString("domain " + d.Name)
	if d.File != "" {
		b.WriteString(" (" + d.File + ")")
	}
	b.WriteByte('\n')
	if len(d.root.nodes) == 0 {
		b.WriteString("  (no descriptors)\n")
	}
	dumpLevel(&b, &d.root, 1)
	if d.ForwardAuth != nil {
		dumpForwardAuth(&b, d.ForwardAuth)
	}
	if d.RLQS != nil {
		dumpRLQS(&b, d.RLQS)
	}
	for _, w := range d.Warnings {
		b.WriteString("  warning: " + w.Error() + "\n")
	}
	io.WriteString(w, b.String())
}

func dumpLevel(b *strings.Builder, lv *level, depth int) {
	for _, n := range lv.nodes {
		b.WriteString(strings.Repeat("  ", depth))
		b.WriteString(n.Key)
		if n.Value != "" {
			b.WriteString("=" + n.Value)
		}
		var flags []string
		if r := n.limit; r != nil {
			b.WriteString(": " + describe(r))
			for _, m := range r.More {
				b.WriteString(" and " + describe(m))
			}
			for _, m := range r.Limits() {
				if m.Name != "" {
					flags = append(flags, "name="+m.Name)
				}
			}
			if len(r.Replaces) > 0 {
				flags = append(flags, "replaces="+strings.Join(r.Replaces, ","))
			}
			if r.ShadowMode {
				flags = append(flags, "shadow_mode")
			}
			if r.QuotaMode {
				flags = append(flags, "quota_mode")
			}
			if r.DetailedMetric {
				flags = append(flags, "detailed_metric")
			}
			for _, m := range r.Limits() {
				if m.Limit.Billable {
					flags = append(flags, "billable")
					break
				}
			}
			if r.FailureMode != "" {
				flags = append(flags, "failure_mode="+r.FailureMode)
			}
			if r.Metadata != nil {
				flags = append(flags, "metadata")
			}
		}
		if n.ShareThreshold {
			flags = append(flags, "share_threshold")
		}
		if n.ValueToMetric {
			flags = append(flags, "value_to_metric")
		}
		if len(flags) > 0 {
			b.WriteString(" [" + strings.Join(flags, " ") + "]")
		}
		b.WriteByte('\n')
		dumpLevel(b, &n.children, depth+1)
	}
}

// describe returns the rule's limit in words.
func describe(r *RateLimit) string {
	per := r.Unit.String()
	if r.UnitMultiplier > 1 {
		per = strconv.Itoa(r.UnitMultiplier) + " " + per + "s"
	}
	switch {
	case r.Unlimited:
		return "unlimited"
	case r.RequestsPerUnit == 0:
		return "blocked (0 per " + per + ")"
	}
	s := r.Limit.String()
	if r.UnitMultiplier > 1 || r.Unit > Day {
		s += " (" + strconv.FormatUint(uint64(r.RequestsPerUnit), 10) + " per " + per + ")"
	}
	return s
}

// DefaultMaxLogEntries is a file's max_log_entries when it sets none:
// 131,072 entries, 2 MiB for one key of an exact sliding_log at worst. An
// exact log of up to 131,072 per period loads as it is; above, a rule needs
// a precision (or the file a larger max_log_entries).
const DefaultMaxLogEntries = 1 << 17
