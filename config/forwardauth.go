package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/request"
)

// AuthSource says where a forward_auth entry takes its value from.
type AuthSource uint8

// The sources of a forward_auth entry, as the config names them (from:).
const (
	// FromClientIP (client_ip) is the client's address, read from the
	// X-Forwarded-For header as far as trusted proxies wrote it.
	FromClientIP AuthSource = iota
	// FromMethod (method) is the forwarded request's method, in upper
	// case (the canonical form of package request).
	FromMethod
	// FromURI (uri) is the forwarded request's URI: its canonical path
	// (package request) and its query.
	FromURI
	// FromPath (path) is the forwarded request's canonical path, without
	// the query.
	FromPath
	// FromHeader (header) is the value of the request header named by
	// AuthEntry.Header.
	FromHeader
	// FromLiteral (literal) is AuthEntry.Value itself, like Envoy's
	// generic_key.
	FromLiteral
	// FromHost (host) is the forwarded request's host (X-Forwarded-Host)
	// in canonical form: lower case, without port or trailing dot.
	FromHost
)

// authSourceList lists the sources for error messages.
const authSourceList = "client_ip, method, uri, path, host, header or literal"

var authSourceNames = [...]string{
	FromClientIP: "client_ip",
	FromMethod:   "method",
	FromURI:      "uri",
	FromPath:     "path",
	FromHeader:   "header",
	FromLiteral:  "literal",
	FromHost:     "host",
}

// String returns the source's configuration name, such as "client_ip", or
// "unknown" for a value out of range.
func (s AuthSource) String() string {
	if int(s) < len(authSourceNames) {
		return authSourceNames[s]
	}
	return "unknown"
}

// ForwardAuth is a domain's forward_auth section, a Sluice extension: the
// descriptors that the forward-auth endpoint of `sluice serve` (/auth)
// builds, for this domain, from each request a reverse proxy asks about. At
// most one domain of a Config has one. A ForwardAuth belongs to its Config
// and must not be modified; it is safe to read from many goroutines.
type ForwardAuth struct {
	// Domain is the domain of the file that holds the section; the
	// descriptors are looked up in it.
	Domain string
	// TrustedProxies are the networks of trusted_proxies, whose
	// X-Forwarded-For entries are believed (a single address is a /32 or
	// /128). Empty when the section names none; the server may add its
	// own.
	TrustedProxies []netip.Prefix
	// Descriptors are the descriptors to build, in order; at least one.
	Descriptors []AuthDescriptor
	// PathSemantics is path_semantics: how the application behind the
	// proxy reads a path, which folds the path of the path and uri
	// entries (request.PathSemantics.Fold) as `sluice proxy` folds a
	// route's path: under case_insensitive, "/LOGIN" is "/login". The
	// zero value, PathStrict, folds nothing.
	PathSemantics request.PathSemantics
	// File and Line locate the forward_auth key.
	File string
	Line int
}

// AuthDescriptor is one descriptor of a forward_auth section.
type AuthDescriptor struct {
	// Entries are the descriptor's entries, in order; at least one.
	Entries []AuthEntry
	// Line is the line of the descriptor in its file.
	Line int
}

// AuthEntry is one entry of a forward_auth descriptor: the entry's key and
// where its value comes from.
type AuthEntry struct {
	// Key is the entry's key, as the domain's descriptors name it.
	Key string
	// From says where the value comes from.
	From AuthSource
	// Header names the request header of FromHeader; "" otherwise.
	Header string
	// Value is the value of FromLiteral; "" otherwise.
	Value string
	// Line and Column locate the entry in its file.
	Line, Column int
}

// NeedsClientIP returns the first entry that reads the client's address
// (FromClientIP), or nil when none does. A server uses it to refuse a
// section that would need trusted proxies and has none, naming the entry.
func (fa *ForwardAuth) NeedsClientIP() *AuthEntry {
	for i := range fa.Descriptors {
		for j := range fa.Descriptors[i].Entries {
			if e := &fa.Descriptors[i].Entries[j]; e.From == FromClientIP {
				return e
			}
		}
	}
	return nil
}

// ForwardAuth returns the forward_auth section of c's domains (at most one
// has one, as New checks), or nil when there is none.
func (c *Config) ForwardAuth() *ForwardAuth {
	if c == nil {
		return nil
	}
	for _, d := range c.sorted {
		if d.ForwardAuth != nil {
			return d.ForwardAuth
		}
	}
	return nil
}

// The keys of the forward_auth blocks.
var (
	forwardAuthKeys    = []string{"trusted_proxies", "path_semantics", "descriptors"}
	authDescriptorKeys = []string{"entries"}
	authEntryKeys      = []string{"key", "from", "header", "value"}
)

// The names of the forward_auth blocks in errors.
const (
	whereAuth      = "forward_auth"
	whereAuthDesc  = "forward_auth descriptor"
	whereAuthEntry = "forward_auth entry"
)

// forwardAuth compiles the forward_auth section n, whose key is key.
func (p *parser) forwardAuth(key, n *yaml.Node) (*ForwardAuth, error) {
	fields, err := p.fields(n, whereAuth, forwardAuthKeys)
	if err != nil {
		return nil, err
	}
	n = deref(n)
	fa := &ForwardAuth{Domain: p.domain.Name, File: p.file, Line: key.Line}
	var descs *yaml.Node
	for _, f := range fields {
		switch f.key.Value {
		case "trusted_proxies":
			if fa.TrustedProxies, err = p.prefixes(f.val); err != nil {
				return nil, err
			}
		case "descriptors":
			descs = f.val
		case "path_semantics":
			v, err := p.str(f.val, "path_semantics")
			if err != nil {
				return nil, err
			}
			if fa.PathSemantics, err = PathSemanticsValue(v); err != nil {
				return nil, p.errf(f.val, "%v", err)
			}
		}
	}
	fa.Descriptors, err = compileList(p, n, descs, "forward_auth descriptors must be a list",
		"forward_auth has no descriptors (want a list of {entries: [{key: ..., from: ...}]})", p.authDescriptor)
	if err != nil {
		return nil, err
	}
	if err := p.checkCanonicalValues(fa, &p.domain.root); err != nil {
		return nil, err
	}
	return fa, nil
}

// checkCanonicalValues refuses a rule value that forward auth could never
// build: a key that an entry fills from the method, path, URI or host gets
// values in canonical form (package request), so a rule value that is not
// ("post", "/login/", "//x", "/%6Cogin") would never match and its limit
// would silently never apply. Wildcard values are not checked.
func (p *parser) checkCanonicalValues(fa *ForwardAuth, lv *level) error {
	from := map[string]AuthSource{}
	for _, d := range fa.Descriptors {
		for _, e := range d.Entries {
			if e.From == FromMethod || e.From == FromPath || e.From == FromURI || e.From == FromHost {
				from[e.Key] = e.From
			}
		}
	}
	if len(from) == 0 {
		return nil
	}
	var walk func(lv *level) error
	walk = func(lv *level) error {
		for _, nd := range lv.nodes {
			src, ok := from[nd.Key]
			if ok && nd.Value != "" && !nd.Wildcard {
				if want, good := canonicalValue(src, nd.Value, fa.PathSemantics); !good {
					msg := fmt.Sprintf("value %q of key %q never matches: forward_auth reads the %v in canonical form", nd.Value, nd.Key, src)
					if (src == FromPath || src == FromURI) && fa.PathSemantics != request.PathStrict {
						msg += ", folded as path_semantics " + fa.PathSemantics.String() + " says"
					}
					if want != "" {
						msg += fmt.Sprintf(" (write %q)", want)
					}
					return &Error{File: p.file, Line: nd.line, Msg: msg}
				}
			}
			if err := walk(&nd.children); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(lv)
}

// canonicalValue returns the canonical form of a rule value v for the
// source src, a path's folded by sem, and whether v is already in it (""
// when v has none).
func canonicalValue(src AuthSource, v string, sem request.PathSemantics) (string, bool) {
	switch src {
	case FromMethod:
		m, err := request.Method(v)
		return m, err == nil && m == v
	case FromHost:
		h, err := request.Host(v)
		return h, err == nil && h == v
	}
	path, query, hasQuery := strings.Cut(v, "?")
	c, err := request.Path(path)
	if err != nil {
		return "", false
	}
	c = sem.Fold(request.DecodeSlashes(c))
	if src == FromURI && hasQuery {
		c += "?" + query
	}
	return c, c == v
}

// compileList compiles each item of list, the value of a key of parent
// (nil when the key is absent), with each, after counting it against
// maxDescriptors (countOne: aliases can repeat a list). The list must hold
// at least one item: the errors are none (at parent when the key is
// absent), notList (followed by what list is), then the first of the
// count's and each's.
func compileList[T any](p *parser, parent, list *yaml.Node, notList, none string, each func(*yaml.Node) (T, error)) ([]T, error) {
	if list == nil {
		return nil, p.errf(parent, "%s", none)
	}
	list = deref(list)
	if list.Kind != yaml.SequenceNode {
		return nil, p.errf(list, "%s, not %s", notList, kind(list))
	}
	if len(list.Content) == 0 {
		return nil, p.errf(list, "%s", none)
	}
	var out []T // grown as each item passes its count and each's checks
	for _, item := range list.Content {
		if err := p.countOne(item); err != nil {
			return nil, err
		}
		v, err := each(item)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// prefixes reads trusted_proxies: a list of networks ("10.0.0.0/8") or
// addresses ("192.0.2.1", a /32). Host bits are cleared, and an
// IPv4-mapped IPv6 network of /96 or longer becomes the IPv4 network it
// covers, since client addresses are compared unmapped.
func (p *parser) prefixes(n *yaml.Node) ([]netip.Prefix, error) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, "trusted_proxies must be a list of networks such as 10.0.0.0/8, not %s", kind(n))
	}
	out := make([]netip.Prefix, 0, len(n.Content))
	for _, item := range n.Content {
		s, err := p.str(item, "a trusted proxy")
		if err != nil {
			return nil, err
		}
		pf, err := parseProxy(strings.TrimSpace(s))
		if err != nil {
			e := p.errf(deref(item), "trusted proxy %q is not an address or a network such as 10.0.0.0/8", s)
			e.Err = err
			return nil, e
		}
		out = append(out, pf)
	}
	return out, nil
}

// parseProxy parses one trusted proxy as clientip does (see prefixes),
// so that the serve and proxy configs mean one thing by a trusted proxy.
func parseProxy(s string) (netip.Prefix, error) {
	p, err := clientip.ParsePrefixes(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p[0], nil
}

// authDescriptor compiles one forward_auth descriptor.
func (p *parser) authDescriptor(n *yaml.Node) (AuthDescriptor, error) {
	var d AuthDescriptor
	fields, err := p.fields(n, whereAuthDesc, authDescriptorKeys)
	if err != nil {
		return d, err
	}
	n = deref(n)
	d.Line = n.Line
	var entries *yaml.Node
	for _, f := range fields {
		entries = f.val // the only key
	}
	d.Entries, err = compileList(p, n, entries, "entries must be a list of {key: ..., from: ...}",
		"forward_auth descriptor has no entries", p.authEntry)
	return d, err
}

// authEntry compiles one forward_auth entry: its fields are read, then
// checked together.
func (p *parser) authEntry(n *yaml.Node) (AuthEntry, error) {
	var e AuthEntry
	fields, err := p.fields(n, whereAuthEntry, authEntryKeys)
	if err != nil {
		return e, err
	}
	n = deref(n)
	e.Line, e.Column = n.Line, n.Column
	var at authEntryNodes
	for _, f := range fields {
		if err := p.authField(&e, &at, f.key, f.val); err != nil {
			return e, err
		}
	}
	return e, p.checkAuthEntry(n, &e, &at)
}

// authEntryNodes holds the key node of each field an entry wrote (nil for a
// field it did not write), for checkAuthEntry's positions.
type authEntryNodes struct {
	key, from, header, value *yaml.Node
}

// authField reads the field named by key into e and notes key in at.
func (p *parser) authField(e *AuthEntry, at *authEntryNodes, key, val *yaml.Node) error {
	var err error
	switch key.Value {
	case "key":
		at.key = key
		e.Key, err = p.str(val, "key")
	case "from":
		at.from = key
		e.From, err = p.authFrom(val)
	case "header":
		at.header = key
		e.Header, err = p.str(val, "header")
	case "value":
		at.value = key
		e.Value, err = p.str(val, "value")
	}
	return err
}

// authFrom reads a from: value, suggesting the closest source for an
// unknown one.
func (p *parser) authFrom(val *yaml.Node) (AuthSource, error) {
	s, err := p.str(val, "from")
	if err != nil {
		return 0, err
	}
	from, ok := parseAuthSource(s)
	if ok {
		return from, nil
	}
	msg := fmt.Sprintf("unknown from %q (want %s)", s, authSourceList)
	if g := suggest(s, authSourceNames[:]); g != "" {
		msg = fmt.Sprintf("unknown from %q (did you mean %q?)", s, g)
	}
	return 0, p.errf(deref(val), "%s", msg)
}

// checkAuthEntry refuses an entry (at node n) whose fields do not go
// together. It is one flat list of rules, one case a rule, each with its
// own message, so that a reader finds the rule for a message in one place;
// splitting it would scatter the list without making any rule simpler.
func (p *parser) checkAuthEntry(n *yaml.Node, e *AuthEntry, at *authEntryNodes) error {
	switch {
	case at.key == nil:
		return p.errf(n, "forward_auth entry has no key")
	case e.Key == "":
		return p.errf(at.key, "forward_auth entry has an empty key")
	case at.from == nil:
		return p.errf(n, "forward_auth entry %q has no from (want %s)", e.Key, authSourceList)
	case e.From == FromHeader && (at.header == nil || e.Header == ""):
		return p.errf(firstOf(at.header, n), "forward_auth entry %q is from: header but names no header (header: X-...)", e.Key)
	case e.From == FromHeader && !validHeaderName(e.Header):
		return p.errf(at.header, "header %q is not a valid header name", e.Header)
	case e.From == FromHeader && strings.EqualFold(e.Header, "Host"):
		// net/http moves it out of the headers: never a value, never a limit.
		return p.errf(at.header, "header %q is never among the forwarded request's headers (the host is not a header to the server): write from: host, which reads X-Forwarded-Host", e.Header)
	case e.From == FromHeader && strings.EqualFold(e.Header, "Transfer-Encoding"):
		return p.errf(at.header, "header %q is never among the forwarded request's headers (the server consumes it)", e.Header)
	case e.From != FromHeader && at.header != nil:
		return p.errf(at.header, "header applies only to from: header, not from: %v", e.From)
	case e.From == FromLiteral && (at.value == nil || e.Value == ""):
		return p.errf(firstOf(at.value, n), "forward_auth entry %q is from: literal but has no value", e.Key)
	case e.From != FromLiteral && at.value != nil:
		return p.errf(at.value, "value applies only to from: literal; from: %v reads the value from the request", e.From)
	}
	return nil
}

// parseAuthSource returns the source named s (exact, lower case).
func parseAuthSource(s string) (AuthSource, bool) {
	i := slices.Index(authSourceNames[:], s)
	if i < 0 {
		return 0, false
	}
	return AuthSource(i), true
}

// validHeaderName reports whether s is an HTTP field name: one or more
// token characters (RFC 9110, section 5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// dumpForwardAuth writes fa for Dump: a line naming the section, then one
// line per descriptor, its entries as key=<source> (a literal as its quoted
// value), separated by commas.
func dumpForwardAuth(b *strings.Builder, fa *ForwardAuth) {
	b.WriteString("forward_auth " + fa.Domain)
	if fa.File != "" {
		b.WriteString(" (" + fa.File + ":" + strconv.Itoa(fa.Line) + ")")
	}
	if len(fa.TrustedProxies) > 0 {
		b.WriteString(" trusted_proxies")
		for _, pf := range fa.TrustedProxies {
			b.WriteString(" " + pf.String())
		}
	}
	if fa.PathSemantics != request.PathStrict {
		b.WriteString(" path_semantics " + fa.PathSemantics.String())
	}
	b.WriteByte('\n')
	for _, d := range fa.Descriptors {
		b.WriteString("  ")
		for i, e := range d.Entries {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.Key + "=")
			switch e.From {
			case FromLiteral:
				b.WriteString(strconv.Quote(e.Value))
			case FromHeader:
				b.WriteString("<header:" + e.Header + ">")
			default:
				b.WriteString("<" + e.From.String() + ">")
			}
		}
		b.WriteByte('\n')
	}
}

// PathSemanticsValue reads the value of a path_semantics key, as every
// file that has one writes it (forward_auth here, the proxy file's top
// level and upstreams): one of request.PathSemanticsNames. Unlike
// request.ParsePathSemantics, it refuses "" (a key set to nothing), since
// a file that names the key means to choose. The error reads
// `path_semantics "x": want strict, ...`.
func PathSemanticsValue(v string) (request.PathSemantics, error) {
	s, err := request.ParsePathSemantics(v)
	if err != nil || v == "" {
		return request.PathStrict, fmt.Errorf("path_semantics %q: want %s", v, request.PathSemanticsNames)
	}
	return s, nil
}
