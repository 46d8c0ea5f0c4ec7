package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// RLQS is a domain's rlqs section (a Sluice extension): how the rate limit
// quota service (Envoy's RLQS) assigns the domain's rules to the Envoys
// that report usage for them. A nil *RLQS means the defaults, which the
// methods return. The zero value of a field also means its default.
type RLQS struct {
	// AssignmentTTL is the time to live of each assignment sent; an Envoy
	// falls back to its expired_assignment_behavior when no new one comes
	// within it. Default 20s (Envoy reports every 5 s).
	AssignmentTTL time.Duration
	// AbandonAfter is how long a bucket may see no requests before the
	// server tells the Envoy to abandon it. Default 60s.
	AbandonAfter time.Duration
	// ReportTTL is how long an Envoy's last report of a bucket counts in
	// the division of the limit when no new report comes (an Envoy that
	// disconnected from a replica that died). Default 15s.
	ReportTTL time.Duration
	// Reserve is the fraction of a rule's limit divided equally among the
	// Envoys of a bucket whatever their usage, so that an idle Envoy can
	// start at once; the rest follows usage. Default 0.05; 0 < Reserve ≤ 0.5
	// when set.
	Reserve float64
	// File and Line locate the rlqs key.
	File string
	Line int
}

// The defaults of RLQS.
const (
	DefaultRLQSAssignmentTTL = 20 * time.Second
	DefaultRLQSAbandonAfter  = 60 * time.Second
	DefaultRLQSReportTTL     = 15 * time.Second
	DefaultRLQSReserve       = 0.05
)

// TTL returns AssignmentTTL or its default.
func (r *RLQS) TTL() time.Duration {
	return r.or(func(r *RLQS) time.Duration { return r.AssignmentTTL }, DefaultRLQSAssignmentTTL)
}

// Abandon returns AbandonAfter or its default.
func (r *RLQS) Abandon() time.Duration {
	return r.or(func(r *RLQS) time.Duration { return r.AbandonAfter }, DefaultRLQSAbandonAfter)
}

// ReportLife returns ReportTTL or its default.
func (r *RLQS) ReportLife() time.Duration {
	return r.or(func(r *RLQS) time.Duration { return r.ReportTTL }, DefaultRLQSReportTTL)
}

// ReserveFraction returns Reserve or its default.
func (r *RLQS) ReserveFraction() float64 {
	if r == nil || r.Reserve == 0 {
		return DefaultRLQSReserve
	}
	return r.Reserve
}

func (r *RLQS) or(get func(*RLQS) time.Duration, def time.Duration) time.Duration {
	if r == nil || get(r) == 0 {
		return def
	}
	return get(r)
}

var rlqsKeys = []string{"assignment_ttl", "abandon_after", "report_ttl", "reserve"}

// rlqs parses a domain's rlqs section.
func (p *parser) rlqs(key, n *yaml.Node) (*RLQS, error) {
	r := &RLQS{File: p.file, Line: key.Line}
	if isNull(deref(n)) {
		return r, nil
	}
	fields, err := p.fields(n, "rlqs", rlqsKeys)
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		switch f.key.Value {
		case "assignment_ttl":
			r.AssignmentTTL, err = p.seconds(f.val, "rlqs.assignment_ttl", time.Second, time.Hour)
		case "abandon_after":
			r.AbandonAfter, err = p.seconds(f.val, "rlqs.abandon_after", time.Second, 24*time.Hour)
		case "report_ttl":
			r.ReportTTL, err = p.seconds(f.val, "rlqs.report_ttl", time.Second, time.Hour)
		case "reserve":
			r.Reserve, err = p.fraction(f.val, "rlqs.reserve")
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// seconds parses a duration such as "20s" in whole seconds within [lo, hi]:
// Envoy reads only the seconds of a time to live.
func (p *parser) seconds(n *yaml.Node, what string, lo, hi time.Duration) (time.Duration, error) {
	s, err := p.str(n, what)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi || d%time.Second != 0 {
		return 0, p.errf(deref(n), "%s must be a whole number of seconds from %v to %v, such as \"20s\", not %q", what, lo, hi, s)
	}
	return d, nil
}

// fraction parses a number in (0, 0.5].
func (p *parser) fraction(n *yaml.Node, what string) (float64, error) {
	s, err := p.str(n, what)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0 && v <= 0.5) {
		return 0, p.errf(deref(n), "%s must be a number above 0 and at most 0.5, not %q", what, s)
	}
	return v, nil
}

// MaxBucketPairs is the most key/value pairs of a bucket id that
// LookupBucket accepts.
const MaxBucketPairs = 8

// LookupBucket returns the rule of d that an RLQS bucket id names, and its
// pairs in the order of the descriptor path that leads to the rule; nil and
// nil when no rule matches or the id has more than MaxBucketPairs pairs.
// A bucket id is a set of pairs: each pair is one descriptor entry, and the
// entries are put in the order of the configured tree, level by level:
// at each level, the pairs not yet used are tried in the order of their
// keys (byte order), and the first that reaches a rule with every pair
// used wins. Matching is Lookup's (exact values, then wildcards, then
// key-only descriptors).
func (d *Domain) LookupBucket(pairs map[string]string) (*RateLimit, []Entry) {
	if len(pairs) == 0 || len(pairs) > MaxBucketPairs {
		return nil, nil
	}
	w := &setWalk{keys: slices.Sorted(maps.Keys(pairs)), pairs: pairs, failed: make(map[walkState]bool)}
	w.path = make([]Entry, 0, len(w.keys))
	if r := w.walk(&d.root, 0); r != nil {
		return r, w.path
	}
	return nil, nil
}

// setWalk is one LookupBucket: the pairs, the path so far, and the
// (level, pairs used) states already known to lead nowhere, so that the
// work is bounded by the config's levels times 2^MaxBucketPairs rather
// than by the orders of the pairs.
type setWalk struct {
	keys   []string
	pairs  map[string]string
	path   []Entry
	failed map[walkState]bool
}

type walkState struct {
	lv   *level
	used uint16
}

// walk tries each unused key at lv and descends; it returns the rule
// reached with every key used.
func (w *setWalk) walk(lv *level, used uint16) *RateLimit {
	if w.failed[walkState{lv, used}] {
		return nil
	}
	for i, k := range w.keys {
		if used&(1<<i) != 0 {
			continue
		}
		e := Entry{k, w.pairs[k]}
		n := lv.pick(e)
		if n == nil {
			continue
		}
		w.path = append(w.path, e)
		if len(w.path) == len(w.keys) {
			if n.limit != nil {
				return n.limit
			}
		} else if r := w.walk(&n.children, used|1<<i); r != nil {
			return r
		}
		w.path = w.path[:len(w.path)-1]
	}
	w.failed[walkState{lv, used}] = true
	return nil
}

// mergeRLQS returns the rlqs section of either domain, or an error when
// both have one.
func mergeRLQS(a, b *Domain) (*RLQS, error) {
	if a.RLQS != nil && b.RLQS != nil {
		return nil, &Error{File: b.RLQS.File, Line: b.RLQS.Line, Msg: fmt.Sprintf(
			"a second rlqs section for domain %q (the first is at %s:%d): one file of a domain has it", a.Name, a.RLQS.File, a.RLQS.Line)}
	}
	if a.RLQS != nil {
		return a.RLQS, nil
	}
	return b.RLQS, nil
}

// dumpRLQS writes the rlqs section's line of Dump, every value with its
// default filled in.
func dumpRLQS(b *strings.Builder, r *RLQS) {
	fmt.Fprintf(b, "  rlqs (%s:%d) assignment_ttl %v, abandon_after %v, report_ttl %v, reserve %v\n",
		r.File, r.Line, r.TTL(), r.Abandon(), r.ReportLife(), r.ReserveFraction())
}
