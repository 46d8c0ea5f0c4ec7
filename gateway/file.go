package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/safefile"
	"github.com/sluicehq/sluice/internal/strictyaml"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/request"
	"github.com/sluicehq/sluice/rlheader"
)

// File is a proxy configuration file, parsed: the Config it describes and
// the settings that belong to the program rather than to the Gateway.
//
// The file is YAML; see docs/proxy.md for every field. In short:
//
//	listen: ":8080"
//	upstream: http://127.0.0.1:9000
//	status: 429                     # limit_req_status; 400-599
//	trusted_proxies: [10.0.0.0/8]
//	limits:                         # like limit_req_zone + limit_req
//	  - name: per_ip
//	    key: ip
//	    rate: 10r/s
//	    burst: 20
//	    nodelay: true
//	conns:                          # like limit_conn_zone + limit_conn
//	  - {name: per_ip_conn, key: ip, max: 10}
//	routes:
//	  - name: api
//	    match: ["GET /api/", "POST /api/"]
//	    limits: [per_ip]
//	    conns: [per_ip_conn]
type File struct {
	// Name is the file's name as given to ParseFile.
	Name string
	// Config is the Gateway's configuration, without Limiter, InFlight,
	// Logger, AccessLog, Limits, Metrics, Transport and Wait, which the
	// program sets.
	Config Config
	// Listen is the address to listen on ("" if not set).
	Listen string
	// Store is the store URL ("memory", "redis://…"; "" if not set).
	Store string
	// AccessLog is where the access log goes: "stderr" (default), "stdout",
	// "off", or a file path.
	AccessLog string
	// LogKeySecretFile is the file holding the secret of the keyed hash
	// of keys in logs (Config.LogKeySecret), which the program reads; ""
	// if not set.
	LogKeySecretFile string
	// MemoryMaxBytes is memory_max_bytes: the byte budget of the proxy's
	// memory store (memstore.Config.MaxBytes), as NGINX sizes a
	// limit_req_zone (zone=name:10m); 0 if not set (the program's
	// default).
	MemoryMaxBytes int64
	// MemoryMaxKeys is memory_max_keys: the most keys the proxy's memory
	// store holds (memstore.Config.MaxKeys); 0 if not set.
	MemoryMaxKeys int
	// PathSemantics is the file's top-level path_semantics: the
	// Upstream.PathSemantics of each upstream that sets none, which the
	// program gives an upstream it adds (sluice proxy -upstream).
	PathSemantics request.PathSemantics
	// Lines holds the line of each top-level key the file sets, so that
	// the program can name where a setting it checks itself came from
	// (log_key_secret_file, access_log, plans). Nil for an empty file.
	Lines map[string]int
}

// LoadFile reads and parses the file at name: a regular file (a symlink
// to one is followed) of at most strictyaml.MaxBytes (1 MiB), read until
// ctx ends. A FIFO, a device or a directory is refused without blocking.
func LoadFile(ctx context.Context, name string) (*File, error) {
	data, err := safefile.Read(ctx, name, strictyaml.MaxBytes)
	if err != nil {
		// safefile's message starts with the path, which the Error has.
		why := strings.TrimPrefix(err.Error(), name+": ")
		return nil, &config.Error{File: name, Msg: "cannot read the file: " + why, Err: err}
	}
	return ParseFile(name, data)
}

// The keys each block accepts.
var (
	fileKeys     = []string{"listen", "store", "upstream", "upstreams", "max_in_flight", "adaptive", "status", "conn_status", "dry_run", "headers", "hash_keys", "log_keys", "trusted_proxies", "forwarded_header", "upstream_timeout", "client_header_timeout", "client_body_timeout", "client_body_min_rate", "send_timeout", "keepalive_timeout", "store_error_status", "access_log", "memory_max_bytes", "memory_max_keys", "client_max_body_size", "log_key_secret_file", "path_semantics", "limits", "conns", "routes", "plans"}
	upstreamKeys = []string{"name", "url", "max_in_flight", "adaptive", "preserve_host", "path_semantics"}
	limitKeys    = []string{"name", "key", "rate", "burst", "nodelay", "delay", "algorithm", "precision", "missing_key", "dry_run", "count_responses", "penalty"}
	connKeys     = []string{"name", "key", "max", "missing_key", "dry_run"}
	routeKeys    = []string{"name", "match", "methods", "upstream", "priority", "limits", "conns"}
	// A route's limits entry, when it is a mapping: a limit named above
	// with this route's own burst, as NGINX's limit_req zone=z burst=N in
	// one location.
	routeLimitKeys = []string{"name", "burst", "nodelay", "delay", "cost_from_response_header"}
)

// ParseFile parses a proxy configuration. Every error is a *config.Error
// naming the file, the line and what is wrong. ParseFile never panics. The
// YAML is read as the rate limit config's is (internal/strictyaml): one
// document, at most 1 MiB, aliases counted against a node budget of the
// file's bytes, merge keys (<<), a key once per mapping.
func ParseFile(name string, data []byte) (*File, error) {
	doc, err := strictyaml.Decode(name, data)
	if err != nil {
		return nil, err
	}
	if doc.Root == nil {
		return &File{Name: name}, nil // an empty file: no limits
	}
	p := &fileParser{f: &File{Name: name}, doc: doc}
	if err := p.parse(doc.Root); err != nil {
		return nil, err
	}
	return p.f, nil
}

type fileParser struct {
	f   *File
	doc *strictyaml.Doc
}

func (p *fileParser) errf(n *yaml.Node, format string, args ...any) error {
	e := &config.Error{File: p.f.Name, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// fields returns n's mapping as key → value node (aliases followed),
// refusing keys not in allowed (with a suggestion) and duplicates; merge
// keys are expanded.
func (p *fileParser) fields(n *yaml.Node, what string, allowed []string) (map[string]*yaml.Node, error) {
	pairs, err := p.doc.Fields(n, what, allowed)
	if err != nil {
		return nil, err
	}
	m := make(map[string]*yaml.Node, len(pairs))
	for _, kv := range pairs {
		m[kv.Key.Value] = strictyaml.Deref(kv.Value)
	}
	return m, nil
}

// item is fields for an item of a list (what: "a limit"), which must
// have every key in required: when one is missing, the error names them
// all ("a limit needs a name, a key and a rate").
func (p *fileParser) item(n *yaml.Node, what string, allowed []string, required ...string) (map[string]*yaml.Node, error) {
	m, err := p.fields(n, what, allowed)
	if err != nil {
		return nil, err
	}
	for _, k := range required {
		if m[k] == nil {
			return nil, p.errf(n, "%s needs %s", what, needs(required))
		}
	}
	return m, nil
}

// needs lists keys as an error says an item needs them: "a name, a key
// and a rate".
func needs(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		switch {
		case i == 0:
		case i == len(keys)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString("a " + k)
	}
	return b.String()
}

// str returns a scalar's text as strictyaml.String reads it, as the rate
// limit config's strings are read: null is "", numbers and booleans are
// taken as written.
func (p *fileParser) str(n *yaml.Node, what string) (string, error) {
	s, ok := strictyaml.String(n)
	if !ok {
		return "", p.errf(n, "%s must be a string", what)
	}
	return s, nil
}

func (p *fileParser) integer(n *yaml.Node, what string, lo, hi int) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, p.errf(n, "%s must be a whole number", what)
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < lo || v > hi {
		return 0, p.errf(n, "%s %s is out of range (%d to %d)", what, n.Value, lo, hi)
	}
	return v, nil
}

// boolean reads n as strictyaml.Bool does, as the rate limit config's
// booleans are read: YAML 1.1's plain yes and no too, null as false.
func (p *fileParser) boolean(n *yaml.Node, what string) (bool, error) {
	b, ok := strictyaml.Bool(n)
	if !ok {
		return false, p.errf(n, "%s must be true or false", what)
	}
	return b, nil
}

// strings returns a string or a list of strings as a list.
func (p *fileParser) strs(n *yaml.Node, what string) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		s, err := p.str(n, what)
		return []string{s}, err
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, "%s must be a string or a list of strings", what)
	}
	var out []string
	for _, c := range n.Content {
		s, err := p.str(c, what)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// each calls f with every item of the list m[key], if m has key.
func (p *fileParser) each(m map[string]*yaml.Node, key string, f func(*yaml.Node) error) error {
	n := m[key]
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, "%s must be a list", key)
	}
	for _, it := range n.Content {
		if err := f(it); err != nil {
			return err
		}
	}
	return nil
}

// optStr, optInt and optBool set *dst from m[key], if m has key. Each
// reads its own key only, so that several can go through cmp.Or, which
// evaluates them all and returns the first error in order.
func (p *fileParser) optStr(m map[string]*yaml.Node, key string, dst *string) (err error) {
	if n := m[key]; n != nil {
		*dst, err = p.str(n, key)
	}
	return err
}

func (p *fileParser) optInt(m map[string]*yaml.Node, key string, lo, hi int, dst *int) (err error) {
	if n := m[key]; n != nil {
		*dst, err = p.integer(n, key, lo, hi)
	}
	return err
}

func (p *fileParser) optBool(m map[string]*yaml.Node, key string, dst *bool) (err error) {
	if n := m[key]; n != nil {
		*dst, err = p.boolean(n, key)
	}
	return err
}

// optDuration sets *dst from m[key], a duration such as 30s or 1m, if m
// has key; positive refuses 0.
func (p *fileParser) optDuration(m map[string]*yaml.Node, key string, positive bool, dst *time.Duration) error {
	return optParsed(p, m, key, dst, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || (positive && d == 0) {
			return 0, fmt.Errorf("%s %q is not a positive duration such as 30s or 1m", key, s)
		}
		return d, nil
	})
}

// optSizeOrOff reads a size in ParseSizeOrOff's spelling into dst.
func (p *fileParser) optSizeOrOff(m map[string]*yaml.Node, key string, dst *int64) error {
	return optParsed(p, m, key, dst, func(s string) (int64, error) {
		v, err := ParseSizeOrOff(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		return v, nil
	})
}

// optSizePositive reads a size in ParseSize's spelling into dst, refusing
// 0: a budget of nothing is no budget.
func (p *fileParser) optSizePositive(m map[string]*yaml.Node, key string, dst *int64) error {
	return optParsed(p, m, key, dst, func(s string) (int64, error) {
		v, err := ParseSize(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		if v == 0 {
			return 0, fmt.Errorf("%s 0: want a positive size such as 10m", key)
		}
		return v, nil
	})
}

// optParsed sets *dst to parse of the string m[key], if m has key; parse's
// error is the error at the key's line.
func optParsed[T any](p *fileParser, m map[string]*yaml.Node, key string, dst *T, parse func(string) (T, error)) error {
	n := m[key]
	if n == nil {
		return nil
	}
	s, err := p.str(n, key)
	if err != nil {
		return err
	}
	v, err := parse(s)
	if err != nil {
		return p.errf(n, "%v", err)
	}
	*dst = v
	return nil
}

// parse reads the file's top-level mapping into p.f, in the order of its
// steps; the first error ends it.
func (p *fileParser) parse(root *yaml.Node) error {
	top, err := p.fields(root, "the file", fileKeys)
	if err != nil {
		return err
	}
	p.f.Lines = make(map[string]int, len(top))
	for k, n := range top {
		p.f.Lines[k] = n.Line
	}
	if err := p.startSettings(top); err != nil {
		return err
	}
	if err := p.upstreams(top); err != nil {
		return err
	}
	// No upstream is not an error here: the program may give one (sluice
	// proxy -upstream); New refuses a Config without any.
	if err := p.settings(top); err != nil {
		return err
	}
	res, err := p.clientIP(top)
	if err != nil {
		return err
	}
	p.f.Config.TrustedProxies = res
	if err := p.plans(top["plans"]); err != nil {
		return err
	}
	if err := p.lists(top, res); err != nil {
		return err
	}
	return p.checkPlans(top["plans"])
}

// startSettings reads the settings the program applies at start (listen,
// store, memory_max_bytes, memory_max_keys, access_log,
// log_key_secret_file) and the body's size bounds.
func (p *fileParser) startSettings(top map[string]*yaml.Node) error {
	c := &p.f.Config
	if err := cmp.Or(
		p.optStr(top, "listen", &p.f.Listen),
		p.optStr(top, "store", &p.f.Store),
		p.optStr(top, "access_log", &p.f.AccessLog),
		p.optStr(top, "log_key_secret_file", &p.f.LogKeySecretFile),
		p.optSizePositive(top, "memory_max_bytes", &p.f.MemoryMaxBytes),
		p.optInt(top, "memory_max_keys", 1, math.MaxInt32, &p.f.MemoryMaxKeys),
	); err != nil {
		return err
	}
	return cmp.Or(
		p.optSizeOrOff(top, "client_max_body_size", &c.ClientMaxBodySize),          // NGINX's 0: no cap
		p.optSizeOrOff(top, "client_body_min_rate", &c.Timeouts.ClientBodyMinRate), // bytes per second; 0: off
	)
}

// upstreams reads upstream (one URL) or upstreams (a list), not both.
func (p *fileParser) upstreams(top map[string]*yaml.Node) error {
	c := &p.f.Config
	if err := p.pathSemantics(top, &p.f.PathSemantics); err != nil {
		return err
	}
	if n := top["upstream"]; n != nil {
		if top["upstreams"] != nil {
			return p.errf(n, "both upstream and upstreams: use one")
		}
		u, err := p.url(n)
		if err != nil {
			return err
		}
		c.Upstreams = []Upstream{{Name: "upstream", URL: u, PathSemantics: p.f.PathSemantics}}
	}
	return p.each(top, "upstreams", func(it *yaml.Node) error {
		u, err := p.upstream(it, c.Upstreams)
		if err != nil {
			return err
		}
		c.Upstreams = append(c.Upstreams, u)
		return nil
	})
}

// settings reads the gateway's bounds, statuses, switches, headers and
// timeouts.
func (p *fileParser) settings(top map[string]*yaml.Node) error {
	c := &p.f.Config
	if err := cmp.Or(
		p.maxInFlight(top, &c.MaxInFlight, &c.Adaptive),
		// NGINX's limit_req_status and limit_conn_status accept 400 to 599.
		p.optInt(top, "status", 400, 599, &c.StatusCode),
		p.optInt(top, "conn_status", 400, 599, &c.ConcurrencyStatusCode),
		p.optInt(top, "store_error_status", 400, 599, &c.StoreErrorStatus),
		p.optBool(top, "dry_run", &c.DryRun),
		p.optBool(top, "hash_keys", &c.HashKeys),
		p.optBool(top, "log_keys", &c.LogKeys),
	); err != nil {
		return err
	}
	if err := p.headers(top["headers"]); err != nil {
		return err
	}
	return cmp.Or(
		p.optDuration(top, "upstream_timeout", false, &c.UpstreamTimeout),
		p.optDuration(top, "client_header_timeout", true, &c.Timeouts.ClientHeader),
		p.optDuration(top, "client_body_timeout", true, &c.Timeouts.ClientBody),
		p.optDuration(top, "send_timeout", true, &c.Timeouts.Send),
		p.optDuration(top, "keepalive_timeout", true, &c.Timeouts.Keepalive),
	)
}

// headers reads headers (n, nil when absent) as rlheader.ParseModeStrict
// does: exactly draft-11, legacy, both or off; an empty or null value is
// an error, not the default.
func (p *fileParser) headers(n *yaml.Node) error {
	if n == nil {
		return nil
	}
	c := &p.f.Config
	s, err := p.str(n, "headers")
	if err != nil {
		return err
	}
	if strictyaml.IsNull(strictyaml.Deref(n)) {
		return p.errf(n, "headers: no value (want off, legacy, draft-11 or both; leave the key out for draft-11)")
	}
	if c.Headers, err = rlheader.ParseModeStrict(s); err != nil {
		return p.errf(n, "headers: %v", err)
	}
	return nil
}

// clientIP returns the resolver of trusted_proxies and forwarded_header.
func (p *fileParser) clientIP(top map[string]*yaml.Node) (*clientip.Resolver, error) {
	res := &clientip.Resolver{}
	if n := top["trusted_proxies"]; n != nil {
		cidrs, err := p.strs(n, "trusted_proxies")
		if err != nil {
			return nil, err
		}
		if res.TrustedProxies, err = clientip.ParsePrefixes(cidrs...); err != nil {
			return nil, p.errf(n, "trusted_proxies: %v", err)
		}
	}
	if n := top["forwarded_header"]; n != nil {
		s, err := p.str(n, "forwarded_header")
		if err != nil {
			return nil, err
		}
		if res.Header, err = clientip.ParseHeader(s); err != nil {
			return nil, p.errf(n, "forwarded_header: %v", err)
		}
	}
	return res, nil
}

// lists reads limits, conns and routes. Each list may name the items of
// those before it; the first error ends the parse.
func (p *fileParser) lists(top map[string]*yaml.Node, res *clientip.Resolver) error {
	c := &p.f.Config
	limits := map[string]limitSpec{}
	if err := p.each(top, "limits", func(it *yaml.Node) error {
		l, err := p.limit(it, res, limits)
		if err != nil {
			return err
		}
		limits[l.name] = l
		return nil
	}); err != nil {
		return err
	}
	conns := map[string]connSpec{}
	if err := p.each(top, "conns", func(it *yaml.Node) error {
		cs, err := p.conn(it, res, limits, conns)
		if err != nil {
			return err
		}
		conns[cs.name] = cs
		return nil
	}); err != nil {
		return err
	}
	// The routes' patterns, registered once: a conflict is found here,
	// with its line, and New serves with them.
	index := newPatternIndex()
	names := map[string]bool{}
	// Everything New checks beyond the above (an unknown upstream in a
	// route, an invalid limit) is found again here, with its line.
	err := p.each(top, "routes", func(it *yaml.Node) error {
		rt, err := p.route(it, index, len(c.Routes), limits, conns)
		if err != nil {
			return err
		}
		if names[rt.Name] {
			return p.errf(it, "route name %q is used twice", rt.Name)
		}
		names[rt.Name] = true
		c.Routes = append(c.Routes, rt)
		return nil
	})
	c.index = index
	if err == nil {
		plainWhereSettled(c.Routes, limits)
	}
	return err
}

// plainWhereSettled gives every policy of a limit that some route settles
// from a response header (cost_from_response_header) the limit as written,
// without the sliding window's default: ChargeN, which settles, serves the
// two-window counter only, and one limit keeps one layout on every route
// (its keys are shared).
func plainWhereSettled(routes []Route, limits map[string]limitSpec) {
	settled := map[string]bool{}
	for _, rt := range routes {
		for _, pol := range rt.Policies {
			if l := limits[pol.Name]; pol.Settle != nil && l.plain != l.limit && l.plain != (sluice.Limit{}) {
				settled[pol.Name] = true
			}
		}
	}
	for _, rt := range routes {
		for i := range rt.Policies {
			if settled[rt.Policies[i].Name] {
				rt.Policies[i].Limit = limits[rt.Policies[i].Name].plain
			}
		}
	}
}

func (p *fileParser) url(n *yaml.Node) (*url.URL, error) {
	s, err := p.str(n, "the upstream URL")
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, p.errf(n, "upstream URL %q: want http:// or https:// and a host", s)
	}
	return u, nil
}

func (p *fileParser) upstream(n *yaml.Node, before []Upstream) (Upstream, error) {
	var u Upstream
	m, err := p.item(n, "an upstream", upstreamKeys, "name", "url")
	if err != nil {
		return u, err
	}
	if u.Name, err = p.str(m["name"], "name"); err != nil {
		return u, err
	}
	if u.Name == "" || slices.ContainsFunc(before, func(b Upstream) bool { return b.Name == u.Name }) {
		return u, p.errf(m["name"], "upstream name %q is empty or used twice", u.Name)
	}
	if u.URL, err = p.url(m["url"]); err != nil {
		return u, err
	}
	u.PathSemantics = p.f.PathSemantics
	return u, cmp.Or(
		p.maxInFlight(m, &u.MaxInFlight, &u.Adaptive),
		p.optBool(m, "preserve_host", &u.PreserveHost),
		p.pathSemantics(m, &u.PathSemantics),
	)
}

// pathSemantics sets *dst from m's path_semantics, if m has it: strict,
// case_insensitive, iis or servlet.
func (p *fileParser) pathSemantics(m map[string]*yaml.Node, dst *request.PathSemantics) error {
	n := m["path_semantics"]
	if n == nil {
		return nil
	}
	v, err := p.str(n, "path_semantics")
	if err != nil {
		return err
	}
	if *dst, err = config.PathSemanticsValue(v); err != nil {
		return p.errf(n, "%v", err)
	}
	return nil
}

// limitSpec is a limit as written, made into a Policy per route (the
// "route" key needs the route's name).
type limitSpec struct {
	name    string
	key     func(route string) httplimit.KeyFunc
	limit   sluice.Limit
	queue   *queue.Config
	missing httplimit.MissingKey
	shadow  bool
	// countOnly and penalty: count_responses and penalty (afterfile.go).
	countOnly httplimit.StatusSet
	penalty   time.Duration
	// plain is limit before the config's default for a sliding window
	// (config.DefaultSlidingWindow), which a limit some route settles from
	// a response header keeps instead; the zero Limit if none applied.
	plain sluice.Limit
}

type connSpec struct {
	name    string
	key     func(route string) httplimit.KeyFunc // nil: one group
	max     int
	missing httplimit.MissingKey
	shadow  bool
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func (p *fileParser) name(n *yaml.Node, taken func(string) bool) (string, error) {
	s, err := p.str(n, "name")
	if err != nil {
		return "", err
	}
	if !nameRE.MatchString(s) {
		return "", p.errf(n, "name %q: use 1 to 64 letters, digits, '_', '.' or '-'", s)
	}
	if taken(s) {
		return "", p.errf(n, "name %q is used twice (limits and conns share one namespace)", s)
	}
	return s, nil
}

var rateRE = regexp.MustCompile(`^([0-9]+)r/(s|m|h|d)$`)

// limit reads an item of limits: its name (not taken by limits before
// it), key and rate, and either an algorithm (excess rejected at once) or
// NGINX's queue (burst, delay, nodelay).
func (p *fileParser) limit(n *yaml.Node, res *clientip.Resolver, limits map[string]limitSpec) (limitSpec, error) {
	var l limitSpec
	m, err := p.item(n, "a limit", limitKeys, "name", "key", "rate")
	if err != nil {
		return l, err
	}
	if l.name, err = p.name(m["name"], func(s string) bool { _, ok := limits[s]; return ok }); err != nil {
		return l, err
	}
	if l.key, err = p.key(m["key"], res); err != nil {
		return l, err
	}
	rate, period, err := p.rate(m["rate"])
	if err != nil {
		return l, err
	}
	q, hasBurst, err := p.queueParams(m)
	if err != nil {
		return l, err
	}
	q.Rate, q.Period = rate, period
	if v := m["algorithm"]; v != nil {
		if l.limit, err = p.algorithmLimit(v, m, q, hasBurst); err != nil {
			return l, err
		}
	} else {
		l.queue = &q
		if err := l.queue.Validate(); err != nil {
			return l, p.errf(m["rate"], "%v", err)
		}
	}
	if l.missing, err = p.missing(m["missing_key"]); err != nil {
		return l, err
	}
	if err := p.countAndPenalty(m, &l); err != nil {
		return l, err
	}
	if l.queue == nil && l.countOnly.IsEmpty() && l.penalty == 0 {
		// The file sets neither buckets nor moments: the config's default,
		// but for a limit charged after the response (ChargeN serves the
		// two-window counter only; see also lists).
		l.plain, l.limit = l.limit, config.DefaultSlidingWindow(l.limit)
	}
	return l, p.optBool(m, "dry_run", &l.shadow)
}

// rate reads a limit's rate, NGINX's "N r/s" (or r/m, r/h, r/d; spaces
// allowed), as a count and its period.
func (p *fileParser) rate(n *yaml.Node) (int, time.Duration, error) {
	rs, err := p.str(n, "rate")
	if err != nil {
		return 0, 0, err
	}
	rm := rateRE.FindStringSubmatch(strings.ReplaceAll(rs, " ", ""))
	if rm == nil {
		return 0, 0, p.errf(n, "rate %q: want N r/s, r/m, r/h or r/d, such as 10r/s or 30r/m", rs)
	}
	rate, err := strconv.Atoi(rm[1])
	if err != nil || rate < 1 {
		return 0, 0, p.errf(n, "rate %q: the number must be at least 1", rs)
	}
	period := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[rm[2]]
	return rate, period, nil
}

// queueParams reads a limit's burst, nodelay and delay, as NGINX's
// limit_req takes them; hasBurst reports whether burst was given.
func (p *fileParser) queueParams(m map[string]*yaml.Node) (q queue.Config, hasBurst bool, err error) {
	if hasBurst = m["burst"] != nil; hasBurst {
		// NGINX refuses an explicit burst=0 ("invalid burst value").
		if q.Burst, err = p.integer(m["burst"], "burst", 1, 1<<30); err != nil {
			return q, hasBurst, p.errf(m["burst"], "burst %s: must be at least 1 (leave it out for none, as NGINX does)", m["burst"].Value)
		}
	}
	if err := p.optBool(m, "nodelay", &q.NoDelay); err != nil {
		return q, hasBurst, err
	}
	if v := m["delay"]; v != nil {
		if q.NoDelay {
			return q, hasBurst, p.errf(v, "delay and nodelay exclude each other, as in NGINX")
		}
		// NGINX refuses an explicit delay=0 ("invalid delay value").
		if q.Delay, err = p.integer(v, "delay", 1, 1<<30); err != nil {
			return q, hasBurst, p.errf(v, "delay %s: must be at least 1 (leave it out for none, as NGINX does)", v.Value)
		}
		if q.Delay > q.Burst {
			return q, hasBurst, p.errf(v, "delay %d is above burst %d", q.Delay, q.Burst)
		}
	}
	return q, hasBurst, nil
}

// algorithmLimit returns the limit of a limit with an algorithm (v), which
// rejects every excess request at once: no queue settings, a burst for
// the buckets only (their rate by default).
func (p *fileParser) algorithmLimit(v *yaml.Node, m map[string]*yaml.Node, q queue.Config, hasBurst bool) (sluice.Limit, error) {
	s, err := p.str(v, "algorithm")
	if err != nil {
		return sluice.Limit{}, err
	}
	alg, err := sluice.ParseAlgorithm(s)
	if err != nil {
		return sluice.Limit{}, p.errf(v, "algorithm %q: want %s (or leave it out for NGINX's queue)", s, config.AlgorithmNames)
	}
	if q.NoDelay || m["delay"] != nil {
		return sluice.Limit{}, p.errf(v, "nodelay and delay belong to the queue; with algorithm %s every excess request is rejected at once", s)
	}
	// The rule of sluice serve's config: burst is for the buckets, and
	// defaults to the rate (a bucket holds one period's worth).
	burst, err := config.Burst(alg, q.Rate, q.Burst, hasBurst)
	if err != nil {
		return sluice.Limit{}, p.errf(m["burst"], "%v", err)
	}
	lim := sluice.Limit{Algorithm: alg, Rate: q.Rate, Period: q.Period, Burst: burst}
	if pv := m["precision"]; pv != nil {
		if alg != sluice.SlidingLog {
			return sluice.Limit{}, p.errf(pv, "precision applies only to sliding_log, not %v", alg)
		}
		ps, err := p.str(pv, "precision")
		if err != nil {
			return sluice.Limit{}, err
		}
		if lim.Precision, err = time.ParseDuration(ps); err != nil || lim.Precision <= 0 {
			return sluice.Limit{}, p.errf(pv, "precision must be a positive duration, such as \"1s\", not %q", ps)
		}
	}
	if err := lim.Validate(); err != nil {
		return sluice.Limit{}, p.errf(v, "%v", err)
	}
	// A key of an exact sliding log holds up to its rate in entries: the
	// same cap as a service config's default max_log_entries.
	if n := lim.LogEntries(); n > config.DefaultMaxLogEntries {
		fit := time.Duration((int64(lim.Period)-1)/(config.DefaultMaxLogEntries-1) + 1)
		return sluice.Limit{}, p.errf(v, "sliding_log of %d per %v keeps up to %d entries (%d bytes) per key, more than %d: set precision: %v or coarser (the log is then exact to within it), or use sliding_window",
			lim.Rate, lim.Period, n, 16*int64(n), config.DefaultMaxLogEntries, fit)
	}
	return lim, nil
}

func (p *fileParser) conn(n *yaml.Node, res *clientip.Resolver, limits map[string]limitSpec, conns map[string]connSpec) (connSpec, error) {
	var c connSpec
	m, err := p.item(n, "a conn limit", connKeys, "name", "max")
	if err != nil {
		return c, err
	}
	taken := func(s string) bool {
		_, a := limits[s]
		_, b := conns[s]
		return a || b
	}
	if c.name, err = p.name(m["name"], taken); err != nil {
		return c, err
	}
	if c.max, err = p.integer(m["max"], "max", 1, 1<<30); err != nil {
		return c, err
	}
	if v := m["key"]; v != nil {
		if c.key, err = p.key(v, res); err != nil {
			return c, err
		}
	}
	if c.missing, err = p.missing(m["missing_key"]); err != nil {
		return c, err
	}
	return c, p.optBool(m, "dry_run", &c.shadow)
}

func (p *fileParser) missing(n *yaml.Node) (httplimit.MissingKey, error) {
	if n == nil {
		return httplimit.RejectMissing, nil
	}
	s, err := p.str(n, "missing_key")
	if err != nil {
		return 0, err
	}
	switch s {
	case "reject":
		return httplimit.RejectMissing, nil
	case "skip":
		return httplimit.SkipMissing, nil
	}
	return 0, p.errf(n, "missing_key %q: want reject or skip", s)
}

// key compiles a key: one part or a list of parts, each ip, global, route,
// host, method or header:NAME.
func (p *fileParser) key(n *yaml.Node, res *clientip.Resolver) (func(string) httplimit.KeyFunc, error) {
	parts, err := p.strs(n, "key")
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, p.errf(n, "key is empty")
	}
	var fs []func(string) httplimit.KeyFunc
	for _, s := range parts {
		var f func(string) httplimit.KeyFunc
		switch {
		case s == "ip":
			kf := httplimit.ClientIP(res)
			f = func(string) httplimit.KeyFunc { return kf }
		case s == "global":
			f = func(string) httplimit.KeyFunc { return httplimit.Global() }
		case s == "route":
			f = func(route string) httplimit.KeyFunc {
				return func(*http.Request) (string, bool) { return route, true }
			}
		case s == "host":
			kf := httplimit.Host() // canonical: no spelling of a host is a fresh key
			f = func(string) httplimit.KeyFunc { return kf }
		case s == "method":
			kf := httplimit.Method() // canonical: "post" is POST
			f = func(string) httplimit.KeyFunc { return kf }
		case strings.HasPrefix(s, "header:") && len(s) > len("header:"):
			name := s[len("header:"):]
			if err := keyHeader(name); err != nil {
				return nil, p.errf(n, "key %q: %v", s, err)
			}
			kf := httplimit.Header(name)
			f = func(string) httplimit.KeyFunc { return kf }
		default:
			return nil, p.errf(n, "key %q: want ip, global, route, host, method or header:NAME, or a list of them", s)
		}
		fs = append(fs, f)
	}
	if len(fs) == 1 {
		return fs[0], nil
	}
	return func(route string) httplimit.KeyFunc {
		kfs := make([]httplimit.KeyFunc, len(fs))
		for i, f := range fs {
			kfs[i] = f(route)
		}
		return httplimit.Composite(kfs...)
	}, nil
}

// route reads an item of routes, the i-th: its name, patterns (registered
// on index, to find conflicts), methods, upstream, limits and conns.
func (p *fileParser) route(n *yaml.Node, index *patternIndex, i int, limits map[string]limitSpec, conns map[string]connSpec) (Route, error) {
	var rt Route
	m, err := p.item(n, "a route", routeKeys, "name", "match")
	if err != nil {
		return rt, err
	}
	if rt.Name, err = p.str(m["name"], "name"); err != nil {
		return rt, err
	}
	if !nameRE.MatchString(rt.Name) || rt.Name == Unmatched {
		return rt, p.errf(m["name"], "route name %q: use 1 to 64 letters, digits, '_', '.' or '-'", rt.Name)
	}
	if rt.Patterns, err = p.patterns(m["match"], index, i); err != nil {
		return rt, err
	}
	if rt.Methods, err = p.methods(m["methods"], rt.Patterns); err != nil {
		return rt, err
	}
	if v := m["upstream"]; v != nil {
		if rt.Upstream, err = p.str(v, "upstream"); err != nil {
			return rt, err
		}
		if !slices.ContainsFunc(p.f.Config.Upstreams, func(u Upstream) bool { return u.Name == rt.Upstream }) {
			return rt, p.errf(v, "no upstream named %q", rt.Upstream)
		}
	}
	if err := p.foldedPatterns(m["match"], rt); err != nil {
		return rt, err
	}
	if rt.Priority, err = p.routePriority(m["priority"], rt.Upstream); err != nil {
		return rt, err
	}
	if rt.Policies, err = p.routeLimits(m["limits"], limits, rt.Name); err != nil {
		return rt, err
	}
	rt.Concurrency, err = p.routeConns(m["conns"], conns, rt.Name)
	return rt, err
}

// patterns reads the match (n) of the route'th route: one pattern or a
// list, each registered on index, so that one that conflicts with another
// route's is found with its line.
func (p *fileParser) patterns(n *yaml.Node, index *patternIndex, route int) ([]string, error) {
	pats, err := p.strs(n, "match")
	if err != nil {
		return nil, err
	}
	if len(pats) == 0 {
		return nil, p.errf(n, "match has no pattern")
	}
	for i, pat := range pats {
		at := n
		if at.Kind == yaml.SequenceNode {
			at = at.Content[i]
		}
		if err := index.add(route, pat); err != nil {
			return nil, p.errf(at, "%v", err)
		}
	}
	return pats, nil
}

// foldedPatterns refuses, at its line, a pattern of rt (its match, n)
// that its upstream's path semantics never lets match (checkFoldedPattern).
func (p *fileParser) foldedPatterns(n *yaml.Node, rt Route) error {
	ups := p.f.Config.Upstreams
	i := slices.IndexFunc(ups, func(u Upstream) bool { return u.Name == rt.Upstream })
	if rt.Upstream == "" && len(ups) > 0 {
		i = 0
	}
	if i < 0 {
		return nil
	}
	for j, pat := range rt.Patterns {
		if err := checkFoldedPattern(pat, ups[i].PathSemantics); err != nil {
			at := n
			if at.Kind == yaml.SequenceNode {
				at = at.Content[j]
			}
			return p.errf(at, "%v", err)
		}
	}
	return nil
}

// methods reads a route's methods (n, nil when absent): upper-case
// methods, at least one, and no method in the route's patterns besides.
func (p *fileParser) methods(n *yaml.Node, patterns []string) ([]string, error) {
	if n == nil {
		return nil, nil
	}
	methods, err := p.strs(n, "methods")
	if err != nil {
		return nil, err
	}
	for _, meth := range methods {
		if !methodRE.MatchString(meth) {
			return nil, p.errf(n, "method %q: want an upper-case method such as GET or POST", meth)
		}
	}
	if len(methods) == 0 {
		return nil, p.errf(n, "methods is empty: leave it out to allow every method")
	}
	for _, pat := range patterns {
		if strings.ContainsAny(pat, " \t") {
			return nil, p.errf(n, "methods and a method in the pattern %q: use one", pat)
		}
	}
	return methods, nil
}

// routeLimits reads a route's limits (n, nil when absent): one item or a
// list (see routeLimit), each limit named once.
func (p *fileParser) routeLimits(n *yaml.Node, limits map[string]limitSpec, route string) ([]httplimit.Policy, error) {
	if n == nil {
		return nil, nil
	}
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	var pols []httplimit.Policy
	for _, it := range items {
		pol, err := p.routeLimit(it, limits, route)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(pols, func(o httplimit.Policy) bool { return o.Name == pol.Name }) {
			return nil, p.errf(it, "limit %q is named twice in the route", pol.Name)
		}
		pols = append(pols, pol)
	}
	return pols, nil
}

// routeConns reads a route's conns (n, nil when absent): the names of conn
// limits, as the route's in-flight policies.
func (p *fileParser) routeConns(n *yaml.Node, conns map[string]connSpec, route string) ([]httplimit.ConcurrencyPolicy, error) {
	if n == nil {
		return nil, nil
	}
	names, err := p.strs(n, "conns")
	if err != nil {
		return nil, err
	}
	var out []httplimit.ConcurrencyPolicy
	for _, name := range names {
		c, ok := conns[name]
		if !ok {
			return nil, p.errf(n, "no conn limit named %q", name)
		}
		cp := httplimit.ConcurrencyPolicy{Name: c.name, Max: c.max, OnMissingKey: c.missing, Shadow: c.shadow}
		if c.key != nil {
			cp.Key = c.key(route)
		}
		out = append(out, cp)
	}
	return out, nil
}

// methodRE is a method as the methods of a route name it: a token in upper
// case, as NGINX's limit_except takes them.
var methodRE = regexp.MustCompile(`^[A-Z][A-Z_-]{0,31}$`)

// routeLimit compiles one entry of a route's limits: the name of a limit,
// or a mapping with the name and this route's own burst, nodelay or delay
// (NGINX's limit_req zone=z burst=N [nodelay | delay=N] in one location,
// sharing the zone's state with every other location that names it).
func (p *fileParser) routeLimit(n *yaml.Node, limits map[string]limitSpec, route string) (httplimit.Policy, error) {
	var pol httplimit.Policy
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	var m map[string]*yaml.Node
	nameNode := n
	if n.Kind == yaml.MappingNode {
		var err error
		if m, err = p.fields(n, "a route's limit", routeLimitKeys); err != nil {
			return pol, err
		}
		if nameNode = m["name"]; nameNode == nil {
			return pol, p.errf(n, "a route's limit needs the name of a limit")
		}
	}
	name, err := p.str(nameNode, "limits")
	if err != nil {
		return pol, err
	}
	l, ok := limits[name]
	if !ok {
		return pol, p.errf(nameNode, "no limit named %q", name)
	}
	pol = httplimit.Policy{
		Name: l.name, Limit: l.limit, Queue: l.queue, Key: l.key(route),
		OnMissingKey: l.missing, Shadow: l.shadow,
		CountOnly: l.countOnly, Penalty: l.penalty,
	}
	if v := m["cost_from_response_header"]; v != nil {
		if pol.Settle, err = p.costHeader(v, l); err != nil {
			return pol, err
		}
		if len(m) == 2 {
			return pol, nil
		}
	}
	if len(m) <= 1 {
		return pol, nil
	}
	if l.queue == nil {
		return pol, p.errf(n, "limit %q has an algorithm: burst, nodelay and delay per route belong to the queue (a limit without algorithm)", name)
	}
	q := *l.queue
	if v := m["burst"]; v != nil {
		if q.Burst, err = p.integer(v, "burst", 1, 1<<30); err != nil {
			return pol, p.errf(v, "burst %s: must be at least 1 (leave it out for the limit's)", v.Value)
		}
	}
	if m["nodelay"] != nil || m["delay"] != nil {
		// The route's choice replaces the limit's.
		q.NoDelay, q.Delay = false, 0
	}
	if err := p.optBool(m, "nodelay", &q.NoDelay); err != nil {
		return pol, err
	}
	if v := m["delay"]; v != nil {
		if q.NoDelay {
			return pol, p.errf(v, "delay and nodelay exclude each other, as in NGINX")
		}
		if q.Delay, err = p.integer(v, "delay", 1, 1<<30); err != nil {
			return pol, p.errf(v, "delay %s: must be at least 1 (leave it out for none, as NGINX does)", v.Value)
		}
	}
	if q.Delay > q.Burst {
		return pol, p.errf(n, "delay %d is above burst %d", q.Delay, q.Burst)
	}
	if err := q.Validate(); err != nil {
		return pol, p.errf(n, "%v", err)
	}
	pol.Queue = &q
	return pol, nil
}

// namedHeader is keyHeader for a key that must name a header: an empty
// name is refused as "empty".
func namedHeader(name string) error {
	if name == "" {
		return errors.New("empty")
	}
	return keyHeader(name)
}

// keyHeader says why no request carries the header name, or nil: Go's
// server keeps Host and Transfer-Encoding out of the header map, and a
// name that is not a token is no header at all. A limit keyed on one
// would never apply (or, with missing_key: reject, refuse everything).
func keyHeader(name string) error {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return fmt.Errorf("%q is not a header name", name)
		}
	}
	switch {
	case strings.EqualFold(name, "Host"):
		return errors.New("the Host header is the request's host: use key: host (its canonical form)")
	case strings.EqualFold(name, "Transfer-Encoding"):
		return errors.New("no request's header map holds Transfer-Encoding")
	}
	return nil
}
