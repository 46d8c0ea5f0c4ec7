package rlheader

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Field names.
const (
	// HeaderRateLimitPolicy is the field AppendPolicies serializes.
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderRateLimit is the field AppendStatuses serializes.
	HeaderRateLimit = "RateLimit"
	// HeaderRetryAfter is the field FormatRetryAfter serializes.
	HeaderRetryAfter = "Retry-After"
	// HeaderReason is Sluice's own response field that names the policies
	// that refused a request (comma-separated), in the spirit of Stripe's
	// Stripe-Rate-Limited-Reason. Every face that refuses a request sets it.
	HeaderReason = "Sluice-Rate-Limited-Reason"
)

// Quota units registered by the draft (§3.1.2, IANA "RateLimit Quota Units").
const (
	// UnitRequests is the default unit; a Policy expresses it as Unit "".
	UnitRequests = "requests"
	// UnitContentBytes counts the bytes of content.
	UnitContentBytes = "content-bytes"
	// UnitConcurrentRequests counts requests in flight.
	UnitConcurrentRequests = "concurrent-requests"
)

// MaxInteger is the largest RFC 9651 Integer (15 digits). Serialization
// clamps larger quotas and remaining counts to it.
const MaxInteger = 999_999_999_999_999

// maxSeconds is the largest whole number of seconds a time.Duration holds
// (about 292 years). Parsed w and t values above it saturate to it.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// Policy is one quota policy as RateLimit-Policy describes it (draft §3).
// The zero value is not valid: Window must be set.
type Policy struct {
	// Name identifies the policy; it is serialized as an sf-string and must
	// be printable ASCII (0x20-0x7E). Example: "permin".
	Name string
	// Quota is q, the quota units the policy allocates per window;
	// non-negative. Example: 50.
	Quota int64
	// Unit is qu. "" means the default UnitRequests and is omitted on the
	// wire. Example: UnitContentBytes.
	Unit string
	// Window is w, in whole seconds, and must be positive. Zero means "no
	// window" to the parsers (w is optional on the wire) but is an error to
	// Validate. Example: time.Minute.
	Window time.Duration
	// PartitionKey is pk, serialized as a Byte Sequence; nil omits it (an
	// empty non-nil slice is serialized as pk=::).
	PartitionKey []byte
}

// Status is one item of the RateLimit field (draft §4): what is left of a
// policy's quota right now.
type Status struct {
	// Name identifies the policy, as in Policy.Name. Example: "default".
	Name string
	// Remaining is r, the available quota; non-negative. Example: 50.
	Remaining int64
	// Reset is t, the effective window, serialized in whole seconds rounded
	// up. A negative Reset omits t, and ParseStatuses reports an absent t as
	// -1; zero is serialized as t=0. Example: 30*time.Second.
	Reset time.Duration
	// PartitionKey is pk, as in Policy.PartitionKey.
	PartitionKey []byte
}

// Validate reports whether p serializes exactly as given: a printable ASCII
// Name and Unit, a Quota in [0, MaxInteger], and a Window that is a positive
// whole number of seconds (draft §3.1.3: w is a non-zero integer of seconds).
func (p Policy) Validate() error {
	if err := validateName("policy name", p.Name); err != nil {
		return err
	}
	if p.Quota < 0 || p.Quota > MaxInteger {
		return fmt.Errorf("rlheader: policy %q: quota %d outside [0, %d]", p.Name, p.Quota, int64(MaxInteger))
	}
	if p.Unit != "" {
		if err := validateName("policy "+strconv.Quote(p.Name)+" unit", p.Unit); err != nil {
			return err
		}
	}
	if p.Window <= 0 || p.Window%time.Second != 0 {
		return fmt.Errorf("rlheader: policy %q: window %v is not a positive whole number of seconds", p.Name, p.Window)
	}
	return nil
}

// Validate reports whether s serializes exactly as given: a printable ASCII
// Name and a Remaining in [0, MaxInteger]. Any Reset is valid (negative omits
// t; a fraction of a second is rounded up).
func (s Status) Validate() error {
	if err := validateName("status name", s.Name); err != nil {
		return err
	}
	if s.Remaining < 0 || s.Remaining > MaxInteger {
		return fmt.Errorf("rlheader: status %q: remaining %d outside [0, %d]", s.Name, s.Remaining, int64(MaxInteger))
	}
	return nil
}

func validateName(what, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("rlheader: %s %q: byte %d (%#x) is not printable ASCII", what, s, i, c)
		}
	}
	return nil
}

// AppendPolicies appends the RateLimit-Policy field value of ps to dst and
// returns the extended buffer, e.g.
//
//	"permin";q=50;w=60, "perhr";q=1000;w=3600
//
// Parameters come in the order q, qu, w, pk. With no policies it appends
// nothing, and the caller must omit the field. Invalid values are repaired
// as the package documentation describes (clamping, '?' for unprintable
// characters, w rounded up and omitted when Window <= 0), so the output is
// always a valid field; Validate detects them.
func AppendPolicies(dst []byte, ps ...Policy) []byte {
	for i := range ps {
		p := &ps[i]
		dst = appendMember(dst, i, p.Name, ";q=", p.Quota)
		if p.Unit != "" {
			dst = append(dst, ";qu="...)
			dst = appendString(dst, p.Unit)
		}
		if p.Window > 0 {
			dst = append(dst, ";w="...)
			dst = appendInteger(dst, ceilSeconds(p.Window))
		}
		dst = appendPartitionKey(dst, p.PartitionKey)
	}
	return dst
}

// AppendStatuses appends the RateLimit field value of ss to dst and returns
// the extended buffer, e.g.
//
//	"default";r=50;t=30
//
// Parameters come in the order r, t, pk; t is omitted when Reset is negative.
// With no statuses it appends nothing, and the caller must omit the field.
// Invalid values are repaired as for AppendPolicies.
func AppendStatuses(dst []byte, ss ...Status) []byte {
	for i := range ss {
		s := &ss[i]
		dst = appendMember(dst, i, s.Name, ";r=", s.Remaining)
		if s.Reset >= 0 {
			dst = append(dst, ";t="...)
			dst = appendInteger(dst, ceilSeconds(s.Reset))
		}
		dst = appendPartitionKey(dst, s.PartitionKey)
	}
	return dst
}

// appendMember appends the start of the i-th member of a list: the
// separator (none before the first), its name and its first parameter,
// param (";q=" or ";r=") with the integer n.
func appendMember(dst []byte, i int, name, param string, n int64) []byte {
	if i > 0 {
		dst = append(dst, ", "...)
	}
	dst = appendString(dst, name)
	dst = append(dst, param...)
	return appendInteger(dst, n)
}

// appendPartitionKey appends the pk parameter, unless pk is nil.
func appendPartitionKey(dst []byte, pk []byte) []byte {
	if pk == nil {
		return dst
	}
	dst = append(dst, ";pk="...)
	return appendByteSeq(dst, pk)
}

// ceilSeconds is d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// appendInteger appends v clamped to [0, MaxInteger].
func appendInteger(dst []byte, v int64) []byte {
	switch {
	case v < 0:
		v = 0
	case v > MaxInteger:
		v = MaxInteger
	}
	return strconv.AppendInt(dst, v, 10)
}

// appendString appends s as an sf-string: '"' and '\' escaped, and each rune
// outside printable ASCII (and each invalid UTF-8 byte) replaced by '?'.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x80:
			_, n := utf8.DecodeRuneInString(s[i:])
			dst = append(dst, '?')
			i += n
			continue
		case c < 0x20 || c == 0x7f:
			dst = append(dst, '?')
		default:
			dst = append(dst, c)
		}
		i++
	}
	return append(dst, '"')
}

// appendByteSeq appends b as an sf-binary: padded standard base64 between
// colons.
func appendByteSeq(dst []byte, b []byte) []byte {
	dst = append(dst, ':')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, ':')
}

// ParsePolicies parses the field lines of RateLimit-Policy (joined with ", "
// as RFC 9651 says; one line per slice element) strictly.
//
// Each member must be an Item whose value is a String (the policy name), with
// q a non-negative Integer (required), qu a String, w a positive Integer and
// pk a Byte Sequence (all optional); other parameters are ignored. Any
// violation, of RFC 9651 or of these rules, returns an error, and the caller
// must then ignore the whole field. An absent w gives Window 0; a w beyond
// what time.Duration holds (about 292 years) saturates. No lines, or only an
// empty value, is an empty list: nil, nil.
func ParsePolicies(fieldLines []string) ([]Policy, error) {
	return parseList(fieldLines, "RateLimit-Policy", "q", func(m *sfMember, at memberAt, quota int64) (Policy, error) {
		p := Policy{Name: at.name, Quota: quota}
		if qu, ok := lookupParam(m.params, "qu"); ok {
			if qu.kind != sfString {
				return p, at.paramError("qu", "is "+qu.kind.String()+", want a String")
			}
			p.Unit = qu.str
		}
		if w, ok := lookupParam(m.params, "w"); ok {
			secs, err := nonNegativeInteger(at.field, at.i, at.name, "w", w)
			if err != nil {
				return p, err
			}
			if secs == 0 {
				return p, at.paramError("w", "is 0, want a positive Integer")
			}
			p.Window = secondsDuration(secs)
		}
		var err error
		p.PartitionKey, err = partitionKey(at.field, at.i, at.name, m.params)
		return p, err
	})
}

// memberAt names a member in errors: the field, the member's index in the
// list and its name.
type memberAt struct {
	field string
	i     int
	name  string
}

func (at memberAt) paramError(param, problem string) error {
	return paramError(at.field, at.i, at.name, param, problem)
}

// parseList parses the field lines of field strictly as a List whose every
// member has a name and the required non-negative Integer parameter param
// (q or r), then reads the rest of each member with member. No lines, or
// only an empty value, is an empty list: nil, nil.
func parseList[T any](fieldLines []string, field, param string, member func(m *sfMember, at memberAt, n int64) (T, error)) ([]T, error) {
	ms, err := parseSFList(fieldLines)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	out := make([]T, len(ms))
	for i := range ms {
		m := &ms[i]
		at := memberAt{field: field, i: i}
		if at.name, err = memberName(field, i, m); err != nil {
			return nil, err
		}
		v, ok := lookupParam(m.params, param)
		if !ok {
			return nil, at.paramError(param, "missing")
		}
		n, err := nonNegativeInteger(field, i, at.name, param, v)
		if err != nil {
			return nil, err
		}
		if out[i], err = member(m, at, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ParseStatuses parses the field lines of RateLimit strictly, as
// ParsePolicies does RateLimit-Policy.
//
// Each member must be an Item whose value is a String, with r a non-negative
// Integer (required), t a non-negative Integer and pk a Byte Sequence (both
// optional); other parameters are ignored. An absent t gives Reset -1; a t
// beyond what time.Duration holds saturates. Any violation returns an error,
// and the caller must then ignore the whole field.
func ParseStatuses(fieldLines []string) ([]Status, error) {
	return parseList(fieldLines, "RateLimit", "r", func(m *sfMember, at memberAt, remaining int64) (Status, error) {
		s := Status{Name: at.name, Remaining: remaining, Reset: -1}
		if t, ok := lookupParam(m.params, "t"); ok {
			secs, err := nonNegativeInteger(at.field, at.i, at.name, "t", t)
			if err != nil {
				return s, err
			}
			s.Reset = secondsDuration(secs)
		}
		var err error
		s.PartitionKey, err = partitionKey(at.field, at.i, at.name, m.params)
		return s, err
	})
}

// memberName returns the String value of list member i.
func memberName(field string, i int, m *sfMember) (string, error) {
	if m.isInner {
		return "", fmt.Errorf("rlheader: %s member %d is an Inner List, want a String Item", field, i)
	}
	if m.bare.kind != sfString {
		return "", fmt.Errorf("rlheader: %s member %d is %s, want a String", field, i, m.bare.kind)
	}
	return m.bare.str, nil
}

func paramError(field string, i int, name, key, problem string) error {
	return fmt.Errorf("rlheader: %s member %d (%q): parameter %s %s", field, i, name, key, problem)
}

func nonNegativeInteger(field string, i int, name, key string, v sfBare) (int64, error) {
	if v.kind != sfInteger {
		return 0, paramError(field, i, name, key, "is "+v.kind.String()+", want an Integer")
	}
	if v.num < 0 {
		return 0, paramError(field, i, name, key, "is negative")
	}
	return v.num, nil
}

func partitionKey(field string, i int, name string, ps []sfParam) ([]byte, error) {
	pk, ok := lookupParam(ps, "pk")
	if !ok {
		return nil, nil
	}
	if pk.kind != sfBytes {
		return nil, paramError(field, i, name, "pk", "is "+pk.kind.String()+", want a Byte Sequence")
	}
	return pk.bytes, nil
}

// secondsDuration converts non-negative whole seconds, saturating.
func secondsDuration(secs int64) time.Duration {
	if secs > maxSeconds {
		secs = maxSeconds
	}
	return time.Duration(secs) * time.Second
}
