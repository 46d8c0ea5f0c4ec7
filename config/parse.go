package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/strictyaml"
)

// Limits that keep a hostile or broken file from exhausting memory or the
// stack, beside those of strictyaml (a file's bytes, and its nodes with
// aliases expanded). Real configs are far below them.
const (
	maxDepth       = 64      // nested descriptor levels
	maxDescriptors = 200_000 // descriptors in one file, aliases expanded
)

// MaxListLimits is the most limits a descriptor's rate_limits list may
// hold: a request on the descriptor spends on each of them and the load
// compares every pair, so a longer list is refused at its line. Real
// lists hold two or three (a second, a day, a month).
const MaxListLimits = 16

// The keys each block accepts.
var (
	rootKeys       = []string{"domain", "descriptors", "forward_auth", "rlqs", "max_log_entries"}
	descriptorKeys = []string{"key", "value", "rate_limit", "rate_limits", "descriptors", "shadow_mode", "detailed_metric", "value_to_metric", "share_threshold", "quota_mode", "metadata"}
	rateLimitKeys  = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "burst", "buckets", "moments", "unit_multiplier", "failure_mode", "calendar", "billable", "precision"}
	replacesKeys   = []string{"name"}
)

// Parse compiles one file's domain. filename is used in errors and kept in
// the result; data is the YAML. Errors are *Error values with the line and
// column of the offending node. Parse never panics, whatever data holds,
// and its work and memory are bounded by len(data): data over 4 MiB is
// refused with its size, and so is a file whose aliases expand it beyond
// one YAML node per byte (plus 4096), each alias counted as what it names
// every time it is used (see internal/strictyaml).
func Parse(filename string, data []byte) (*Domain, error) {
	return (&parser{file: filename}).parse(data)
}

// parser holds the state of one Parse.
type parser struct {
	file   string
	doc    *strictyaml.Doc
	domain *Domain
	count  int             // descriptors so far
	names  map[string]bool // rule names in the domain
	// listNames are the names of the limits of rate_limits lists.
	listNames map[string]bool
	refs      []*yaml.Node // replaces names, checked at the end
	// maxLog is the file's max_log_entries, and its key node (nil when
	// the file leaves the default).
	maxLog    int
	maxLogKey *yaml.Node
}

// warnf records a warning at n's position in the domain's Warnings.
func (p *parser) warnf(n *yaml.Node, format string, args ...any) {
	p.domain.Warnings = append(p.domain.Warnings, p.errf(n, format, args...))
}

// errf returns an *Error at n's position.
func (p *parser) errf(n *yaml.Node, format string, args ...any) *Error {
	e := &Error{File: p.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

func (p *parser) parse(data []byte) (*Domain, error) {
	doc, err := strictyaml.Decode(p.file, data)
	if err != nil {
		return nil, err
	}
	p.doc = doc
	root := deref(doc.Root)
	if root == nil || isNull(root) {
		return nil, p.errf(root, "missing domain: the file is empty")
	}
	fields, err := p.fields(root, "the file", rootKeys)
	if err != nil {
		return nil, err
	}
	d := &Domain{File: p.file}
	p.domain = d
	p.names = make(map[string]bool)
	p.listNames = make(map[string]bool)
	var descriptors, domainNode, authKey, auth *yaml.Node
	d.MaxLogEntries = DefaultMaxLogEntries
	for _, f := range fields {
		switch f.key.Value {
		case "domain":
			domainNode = f.key
			if d.Name, err = p.str(f.val, "domain"); err != nil {
				return nil, err
			}
			if d.Name == "" {
				return nil, p.errf(f.val, "empty domain")
			}
			d.Line = f.key.Line
		case "descriptors":
			descriptors = f.val
		case "forward_auth":
			authKey, auth = f.key, f.val
		case "rlqs":
			if d.RLQS, err = p.rlqs(f.key, f.val); err != nil {
				return nil, err
			}
		case "max_log_entries":
			v, err := p.integer(f.val, "max_log_entries", 1, sluice.MaxLogRate)
			if err != nil {
				return nil, err
			}
			d.MaxLogEntries, p.maxLogKey = int(v), f.key
		}
	}
	p.maxLog = d.MaxLogEntries
	if domainNode == nil {
		return nil, p.errf(root, "missing domain")
	}
	if descriptors != nil {
		if err := p.descriptors(descriptors, &d.root, d.Name, nil); err != nil {
			return nil, err
		}
	}
	for _, n := range p.refs {
		if !p.names[n.Value] {
			return nil, p.errf(n, "replaces %q, but no rate_limit of domain %q has that name", n.Value, d.Name)
		}
		if p.listNames[n.Value] {
			return nil, p.errf(n, "replaces %q, a limit of a rate_limits list: only a rate_limit block can be replaced", n.Value)
		}
	}
	if auth != nil {
		if d.ForwardAuth, err = p.forwardAuth(authKey, auth); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// field is one key: value pair of a mapping.
type field struct{ key, val *yaml.Node }

// deref follows aliases to the node they stand for.
func deref(n *yaml.Node) *yaml.Node { return strictyaml.Deref(n) }

// isNull reports whether n is a null scalar (null, ~ or nothing).
func isNull(n *yaml.Node) bool { return strictyaml.IsNull(n) }

// kind names a node's kind for error messages.
func kind(n *yaml.Node) string { return strictyaml.Kind(n) }

// fields returns the pairs of mapping n, merge keys expanded, after
// checking that every key is one of allowed and appears once. where names
// the block in errors ("rate_limit").
func (p *parser) fields(n *yaml.Node, where string, allowed []string) ([]field, error) {
	ps, err := p.doc.Pairs(n, where)
	if err != nil {
		return nil, err
	}
	fs := make([]field, len(ps))
	for i, pr := range ps {
		if !slices.Contains(allowed, pr.Key.Value) {
			return nil, p.errf(pr.Key, "%s", unknownKey(pr.Key.Value, where, allowed))
		}
		fs[i] = field{pr.Key, pr.Value}
	}
	return fs, nil
}

// unknownKey explains an unknown key: a key that belongs in another block,
// or else what strictyaml.UnknownKey says (a likely typo, or the keys
// allowed).
func unknownKey(k, where string, allowed []string) string {
	msg := fmt.Sprintf("unknown key %q in %s", k, where)
	switch {
	case where == "descriptor" && slices.Contains(rateLimitKeys, k):
		return msg + " (it belongs under rate_limit)"
	case where == "rate_limit" && slices.Contains(descriptorKeys, k):
		return msg + " (it belongs in the descriptor, beside rate_limit)"
	case where == whereAuthDesc && slices.Contains(authEntryKeys, k):
		return msg + " (a descriptor lists its entries under entries: - entries: [{key: ..., from: ...}])"
	}
	return strictyaml.UnknownKey(k, where, allowed)
}

// str returns a scalar's text as strictyaml.String reads it: null is "",
// numbers and booleans are taken as written, so value: 500 is the string
// "500".
func (p *parser) str(n *yaml.Node, what string) (string, error) {
	s, ok := strictyaml.String(n)
	if !ok {
		return "", p.errf(deref(n), "%s must be a string, not %s", what, kind(deref(n)))
	}
	return s, nil
}

// boolean returns a scalar's truth as strictyaml.Bool reads it (YAML 1.1's
// plain yes and no too, as envoyproxy/ratelimit reads them); null is false.
func (p *parser) boolean(n *yaml.Node, what string) (bool, error) {
	b, ok := strictyaml.Bool(n)
	if !ok {
		return false, p.errf(deref(n), "%s must be true or false, not %s", what, kind(deref(n)))
	}
	return b, nil
}

// integer returns a whole number scalar in [lo, hi].
func (p *parser) integer(n *yaml.Node, what string, lo, hi int64) (int64, error) {
	n = deref(n)
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return 0, p.errf(n, "%s must be a whole number, not %s", what, kind(n))
	}
	if v < lo || v > hi {
		return 0, p.errf(n, "%s %d is out of range [%d, %d]", what, v, lo, hi)
	}
	return v, nil
}

// descriptors compiles the list n into lv. parentKey is the FullKey so far;
// parent the path so far.
func (p *parser) descriptors(n *yaml.Node, lv *level, parentKey string, parent []PathEntry) error {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, "descriptors must be a list, not %s", kind(n))
	}
	if len(parent) >= maxDepth {
		return p.errf(n, "descriptors nested deeper than %d levels", maxDepth)
	}
	for _, item := range n.Content {
		if err := p.descriptor(item, lv, parentKey, parent); err != nil {
			return err
		}
	}
	return nil
}

// descriptorRead holds what descriptorFields read of one descriptor
// beside its PathEntry: the nodes the later steps need and its flags.
type descriptorRead struct {
	keyNode, rateLimit, rateLimits, children, shareNode, metaKey *yaml.Node
	nullRule                                                     *yaml.Node // rate_limit: null
	shadow, quota, detailed                                      bool
	metadata                                                     map[string]any
}

// descriptor compiles one descriptor mapping into lv: its fields, the
// checks between them, its rules, then its children.
func (p *parser) descriptor(n *yaml.Node, lv *level, parentKey string, parent []PathEntry) error {
	if err := p.countOne(n); err != nil {
		return err
	}
	fields, err := p.fields(n, "descriptor", descriptorKeys)
	if err != nil {
		return err
	}
	n = deref(n)
	nd := &node{line: n.Line}
	var k descriptorRead
	for _, f := range fields {
		if err := p.descriptorField(f, nd, &k); err != nil {
			return err
		}
	}
	if err := p.checkDescriptor(n, lv, nd, &k); err != nil {
		return err
	}
	fullKey := parentKey + "." + nd.Key
	if nd.Value != "" {
		fullKey += "_" + nd.Value
	}
	path := make([]PathEntry, len(parent)+1)
	copy(path, parent)
	path[len(parent)] = nd.PathEntry
	if err := p.descriptorRules(nd, &k, fullKey, path); err != nil {
		return err
	}
	if k.children != nil {
		if err := p.descriptors(k.children, &nd.children, fullKey, path); err != nil {
			return err
		}
	}
	lv.add(nd)
	return nil
}

// descriptorField reads one key of a descriptor into nd and k.
func (p *parser) descriptorField(f field, nd *node, k *descriptorRead) (err error) {
	switch f.key.Value {
	case "key":
		k.keyNode = f.val
		nd.Key, err = p.str(f.val, "key")
	case "value":
		nd.Value, err = p.str(f.val, "value")
	case "rate_limit":
		// rate_limit: null is no rule, as envoyproxy/ratelimit reads it
		// (Envoy Gateway writes it on every descriptor above a rule).
		if isNull(deref(f.val)) {
			k.nullRule = f.val
		} else {
			k.rateLimit = f.val
		}
	case "rate_limits":
		k.rateLimits = f.val
	case "descriptors":
		k.children = f.val
	case "shadow_mode":
		k.shadow, err = p.boolean(f.val, "shadow_mode")
	case "quota_mode":
		k.quota, err = p.boolean(f.val, "quota_mode")
	case "detailed_metric":
		k.detailed, err = p.boolean(f.val, "detailed_metric")
	case "value_to_metric":
		nd.ValueToMetric, err = p.boolean(f.val, "value_to_metric")
	case "share_threshold":
		k.shareNode = f.key
		nd.ShareThreshold, err = p.boolean(f.val, "share_threshold")
	case "metadata":
		k.metaKey = f.key
		k.metadata, err = p.metadata(f.val)
	}
	return err
}

// checkDescriptor checks what involves several keys of a descriptor, and
// that lv has no descriptor of the same key and value.
func (p *parser) checkDescriptor(n *yaml.Node, lv *level, nd *node, k *descriptorRead) error {
	switch {
	case k.keyNode == nil:
		return p.errf(n, "descriptor has no key")
	case nd.Key == "":
		return p.errf(deref(k.keyNode), "descriptor has an empty key")
	}
	if strings.Contains(nd.Value, "*") {
		nd.Wildcard = true
		nd.pat = compile(nd.Value)
	}
	if nd.ShareThreshold && !nd.Wildcard {
		return p.errf(k.shareNode, "share_threshold needs a wildcard value (one with '*')")
	}
	if k.rateLimit != nil && k.rateLimits != nil {
		return p.errf(n, "descriptor has both rate_limit and rate_limits: write one rate_limits list")
	}
	if k.rateLimit == nil && k.rateLimits == nil {
		p.ruleless(n, k)
	}
	if k.nullRule != nil && k.children == nil {
		p.warnf(deref(k.nullRule), "rate_limit is empty, so this descriptor limits nothing (as envoyproxy/ratelimit reads it): if a block was meant, indent it under rate_limit")
	}
	if prev := lv.find(nd.Key, nd.Value); prev != nil {
		if nd.Value == "" {
			return p.errf(n, "duplicate descriptor: key %q without a value is already at line %d", nd.Key, prev.line)
		}
		return p.errf(n, "duplicate descriptor: key %q value %q is already at line %d", nd.Key, nd.Value, prev.line)
	}
	return nil
}

// ruleless warns of the flags of a descriptor's rule (shadow_mode,
// quota_mode, detailed_metric) and of metadata set on a descriptor with no
// rule, which they do not change: envoyproxy/ratelimit ignores them there,
// and Envoy Gateway's translator writes shadow_mode on every descriptor of
// a shadowed rule's path. Ignored, not refused: a refusal would NACK such a
// config over xDS and stop every later update of the domain.
func (p *parser) ruleless(n *yaml.Node, k *descriptorRead) {
	for _, f := range []struct {
		on   bool
		name string
	}{{k.shadow, "shadow_mode"}, {k.quota, "quota_mode"}, {k.detailed, "detailed_metric"}} {
		if f.on {
			p.warnf(n, "%s applies to a descriptor's own rate_limit, and this descriptor has none: ignored (as envoyproxy/ratelimit ignores it; the rules below keep their own)", f.name)
		}
	}
	if k.metaKey != nil {
		p.warnf(k.metaKey, "metadata applies to a descriptor with a rate_limit (it is returned for the rule a request matches), and this descriptor has none: ignored, as envoyproxy/ratelimit ignores it")
	}
}

// descriptorRules compiles a descriptor's rate_limit, or its rate_limits
// list, into nd.limit, with the descriptor's flags and metadata.
func (p *parser) descriptorRules(nd *node, k *descriptorRead, fullKey string, path []PathEntry) error {
	var rules []*RateLimit
	switch {
	case k.rateLimit != nil:
		r, err := p.rateLimit(k.rateLimit)
		if err != nil {
			return err
		}
		rules = []*RateLimit{r}
	case k.rateLimits != nil:
		var err error
		if rules, err = p.rateLimitList(k.rateLimits); err != nil {
			return err
		}
	default:
		return nil
	}
	shared, toMetric := false, false
	for _, e := range path {
		shared = shared || e.ShareThreshold
		toMetric = toMetric || e.ValueToMetric
	}
	for _, r := range rules {
		r.FullKey, r.Path = fullKey, path
		r.ShadowMode, r.QuotaMode, r.DetailedMetric = k.shadow, k.quota, k.detailed
		r.Metadata, r.Shared, r.ValueToMetric = k.metadata, shared, toMetric && !k.detailed
	}
	nd.limit = rules[0]
	if len(rules) > 1 {
		nd.limit.More = rules[1:]
	}
	p.domain.rules += len(rules)
	return nil
}

// rateLimitList compiles a rate_limits list: one or more limits, each a
// rate_limit block that limits (neither unlimited nor 0, which rate_limit
// writes), of periods that differ.
func (p *parser) rateLimitList(n *yaml.Node) ([]*RateLimit, error) {
	n = deref(n)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, p.errf(n, "rate_limits must be a list of one or more rate_limit blocks, not %s", kind(n))
	}
	if len(n.Content) > MaxListLimits {
		return nil, p.errf(n, "%d limits in rate_limits, over the limit of %d", len(n.Content), MaxListLimits)
	}
	rules := make([]*RateLimit, 0, len(n.Content))
	for _, item := range n.Content {
		if err := p.countOne(item); err != nil {
			return nil, err
		}
		r, err := p.rateLimit(item)
		if err != nil {
			return nil, err
		}
		if len(r.Replaces) > 0 {
			return nil, p.errf(deref(item), "replaces in a rate_limits list: a rule that replaces others is a rate_limit block")
		}
		if r.Name != "" {
			p.listNames[r.Name] = true
		}
		if r.Unlimited || r.RequestsPerUnit == 0 {
			return nil, p.errf(deref(item), "a rate_limits list holds limits: write unlimited, or requests_per_unit 0 (which blocks), as a rate_limit block")
		}
		for _, prev := range rules {
			if prev.Period() == r.Period() {
				return nil, p.errf(deref(item), "a second limit per %v in rate_limits (the first is at line %d): each limit of a list needs its own period, and one of them is the tighter", r.Period(), prev.Line)
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// rateLimit compiles a rate_limit block: its keys, then the checks that
// involve several of them.
func (p *parser) rateLimit(n *yaml.Node) (*RateLimit, error) {
	fields, err := p.fields(n, "rate_limit", rateLimitKeys)
	if err != nil {
		return nil, err
	}
	n = deref(n)
	r := &RateLimit{File: p.file, Line: n.Line, UnitMultiplier: 1, Limit: sluice.Limit{Algorithm: sluice.FixedWindow}}
	var k rateLimitRead
	for _, f := range fields {
		if err := p.rateLimitField(f, r, &k); err != nil {
			return nil, err
		}
	}
	for _, name := range r.Replaces {
		if name == r.Name {
			return nil, p.errf(n, "rate_limit %q replaces itself", name)
		}
	}
	if r.Unlimited {
		err = p.unlimited(r, &k)
	} else {
		err = p.limit(n, r, &k)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// rateLimitRead holds what rateLimitField read that the later checks
// need: the key nodes they point at, and the values RateLimit has no
// field for.
type rateLimitRead struct {
	unit, rpu, alg, burst, mult, fail *yaml.Node // key nodes; nil when absent
	billable                          *yaml.Node // the billable key; nil when absent
	prec                              *yaml.Node // the precision key; nil when absent
	buckets                           *yaml.Node // the buckets key; nil when absent
	moments                           *yaml.Node // the moments key; nil when absent
	cal, calValue                     *yaml.Node // the calendar key and its block
	unitText                          string
	burstValue, bucketsValue          int64
	momentsValue                      int64
}

// rateLimitField reads one key of a rate_limit block into r and k.
func (p *parser) rateLimitField(f field, r *RateLimit, k *rateLimitRead) (err error) {
	var v int64
	switch f.key.Value {
	case "unit":
		k.unit = f.key
		k.unitText, err = p.str(f.val, "unit")
	case "requests_per_unit":
		k.rpu = f.key
		v, err = p.integer(f.val, "requests_per_unit", 0, math.MaxUint32)
		r.RequestsPerUnit = uint32(v)
	case "unlimited":
		r.Unlimited, err = p.boolean(f.val, "unlimited")
	case "name":
		// An empty name is no name, as envoyproxy/ratelimit reads it
		// (Envoy Gateway writes name: "" on every rule it translates).
		r.Name, err = p.str(f.val, "name")
		if err == nil && r.Name != "" {
			p.names[r.Name] = true
		}
	case "replaces":
		err = p.replaces(f.val, r)
	case "algorithm":
		k.alg = f.key
		var s string
		if s, err = p.str(f.val, "algorithm"); err == nil {
			if r.Limit.Algorithm, err = sluice.ParseAlgorithm(s); err != nil {
				err = p.errf(deref(f.val), "unknown algorithm %q (want %s)", s, AlgorithmNames)
			}
		}
	case "burst":
		k.burst = f.key
		k.burstValue, err = p.integer(f.val, "burst", 1, sluice.MaxRate)
	case "buckets":
		k.buckets = f.key
		k.bucketsValue, err = p.integer(f.val, "buckets", 1, sluice.MaxBuckets)
	case "moments":
		k.moments = f.key
		k.momentsValue, err = p.integer(f.val, "moments", 0, sluice.MaxMoments)
	case "unit_multiplier":
		k.mult = f.key
		v, err = p.integer(f.val, "unit_multiplier", 1, math.MaxInt32)
		r.UnitMultiplier = int(v)
	case "calendar":
		k.cal, k.calValue = f.key, f.val
	case "billable":
		k.billable = f.key
		r.Limit.Billable, err = p.boolean(f.val, "billable")
	case "precision":
		k.prec = f.key
		var s string
		if s, err = p.str(f.val, "precision"); err == nil {
			d, perr := time.ParseDuration(s)
			if perr != nil || d <= 0 {
				return p.errf(deref(f.val), "precision must be a positive duration, such as \"1s\", not %q", s)
			}
			r.Limit.Precision = d
		}
	case "failure_mode":
		k.fail = f.key
		if r.FailureMode, err = p.str(f.val, "failure_mode"); err == nil {
			if _, perr := sluice.ParseFailureMode(r.FailureMode); perr != nil {
				err = p.errf(deref(f.val), "unknown failure_mode %q (want open, closed or local)", r.FailureMode)
			}
		}
	}
	return err
}

// unlimited checks an unlimited rule, which never reaches a store: nothing
// of the limit's shape applies.
func (p *parser) unlimited(r *RateLimit, k *rateLimitRead) error {
	switch {
	case k.unitText != "":
		return p.errf(k.unit, "should not specify rate limit unit when unlimited")
	case k.alg != nil, k.burst != nil, k.buckets != nil, k.moments != nil, k.mult != nil, k.fail != nil, k.cal != nil, k.billable != nil, k.prec != nil:
		key := firstOf(k.alg, k.burst, k.buckets, k.moments, k.mult, k.fail, k.cal, k.billable, k.prec)
		return p.errf(key, "%s has no effect when unlimited", key.Value)
	}
	r.Limit = sluice.Limit{}
	return nil
}

// limit checks a limited rule's unit, rate, period and burst, and sets
// r.Limit from them; n is the rate_limit block.
func (p *parser) limit(n *yaml.Node, r *RateLimit, k *rateLimitRead) error {
	if k.unit == nil || k.unitText == "" {
		return p.errf(n, "rate_limit has no unit (want second, minute, hour, day, week, month or year, or unlimited: true)")
	}
	var ok bool
	if r.Unit, ok = ParseUnit(k.unitText); !ok {
		return p.errf(k.unit, "invalid rate limit unit %q (want second, minute, hour, day, week, month or year; or quarter with a calendar block)", k.unitText)
	}
	if r.Unit == Quarter && k.cal == nil {
		return p.errf(k.unit, "unit quarter needs a calendar block (such as calendar: {time_zone: UTC}): a quarter is a calendar period, which envoyproxy/ratelimit has no unit for")
	}
	if k.rpu == nil {
		return p.errf(n, "rate_limit has no requests_per_unit (0 blocks every request)")
	}
	if int64(r.UnitMultiplier) > int64(sluice.MaxPeriod/r.Unit.Duration()) {
		return p.errf(k.mult, "unit_multiplier %d makes the period longer than %v", r.UnitMultiplier, time.Duration(sluice.MaxPeriod))
	}
	burst, err := Burst(r.Limit.Algorithm, int(r.RequestsPerUnit), int(k.burstValue), k.burst != nil)
	if err != nil {
		return p.errf(k.burst, "%v", err)
	}
	if alg := r.Limit.Algorithm; k.prec != nil && alg != sluice.SlidingLog {
		return p.errf(k.prec, "precision applies only to sliding_log, not %v", alg)
	}
	if alg := r.Limit.Algorithm; k.buckets != nil && alg != sluice.SlidingWindow {
		return p.errf(k.buckets, "buckets applies only to sliding_window, not %v", alg)
	}
	if k.buckets != nil {
		r.Limit.Buckets = uint8(k.bucketsValue)
	}
	if alg := r.Limit.Algorithm; k.moments != nil && alg != sluice.SlidingWindow {
		return p.errf(k.moments, "moments applies only to sliding_window, not %v", alg)
	}
	if k.moments != nil {
		r.Limit.Moments = uint8(k.momentsValue)
	}
	r.Limit.Rate = int(r.RequestsPerUnit)
	r.Limit.Period = r.Period()
	r.Limit.Burst = burst
	if k.buckets == nil && k.moments == nil {
		r.Limit = DefaultSlidingWindow(r.Limit)
	}
	if k.cal != nil {
		if err := p.calendar(k.cal, k.calValue, r); err != nil {
			return err
		}
	}
	if r.RequestsPerUnit > 0 {
		if err := r.Limit.Validate(); err != nil {
			at := n
			if k.buckets != nil && strings.Contains(err.Error(), "buckets") {
				at = k.buckets // the period or the rate does not suit them
			}
			if k.moments != nil && strings.Contains(err.Error(), "moments") {
				at = k.moments // the rate does not suit them
			}
			e := p.errf(at, "%s", strings.TrimPrefix(err.Error(), sluice.ErrInvalidLimit.Error()+": "))
			e.Msg = "invalid limit: " + e.Msg
			e.Err = err
			return e
		}
		if entries := r.Limit.LogEntries(); entries > p.maxLog {
			return p.logTooLarge(n, entries, r)
		}
	}
	return nil
}

// logTooLarge is the error, at rate_limit block n, for a sliding_log rule
// whose key may hold entries entries, more than the file's
// max_log_entries: it names both, and the finest precision that fits.
func (p *parser) logTooLarge(n *yaml.Node, entries int, r *RateLimit) error {
	// ⌈P/(max−1)⌉, the finest precision with ⌈P/precision⌉+1 ≤ max.
	fit := time.Duration((int64(r.Limit.Period)-1)/int64(max(p.maxLog-1, 1)) + 1)
	e := p.errf(n, "sliding_log of %d per %v keeps up to %d entries (%d bytes) per key, more than max_log_entries %d: set precision: %v or coarser (the log is then exact to within it), raise max_log_entries, or use sliding_window",
		r.Limit.Rate, r.Limit.Period, entries, 16*int64(entries), p.maxLog, fit)
	if p.maxLogKey != nil {
		e.Msg += fmt.Sprintf(" (max_log_entries is set at line %d)", p.maxLogKey.Line)
	}
	return e
}

func firstOf(ns ...*yaml.Node) *yaml.Node {
	for _, n := range ns {
		if n != nil {
			return n
		}
	}
	return nil
}

// countOne counts a descriptor, or a forward_auth descriptor or entry,
// against maxDescriptors, which bounds what aliases can make Parse walk.
func (p *parser) countOne(n *yaml.Node) error {
	p.count++
	if p.count > maxDescriptors {
		return p.errf(n, "more than %d descriptors in one file", maxDescriptors)
	}
	return nil
}

// replaces reads a replaces list of {name: ...} mappings into r.
func (p *parser) replaces(n *yaml.Node, r *RateLimit) error {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, "replaces must be a list of {name: ...}, not %s", kind(n))
	}
	for _, item := range n.Content {
		fields, err := p.fields(item, "replaces", replacesKeys)
		if err != nil {
			return err
		}
		var name string
		var nameNode *yaml.Node
		for _, f := range fields {
			nameNode = deref(f.val)
			if name, err = p.str(f.val, "name"); err != nil {
				return err
			}
		}
		if name == "" {
			return p.errf(firstOf(nameNode, deref(item)), "replaces entry has an empty name")
		}
		r.Replaces = append(r.Replaces, name)
		p.refs = append(p.refs, nameNode)
	}
	return nil
}
