package rlheader

// This file is a strict parser for RFC 9651 Structured Field Lists: the
// syntax of RateLimit and RateLimit-Policy. It implements the whole List
// grammar (inner lists, every bare item type including Dates and Display
// Strings), so that a field is accepted or rejected exactly as the RFC says;
// the callers in ratelimit.go then check the draft's rules on top.
//
// The one deliberate leniency is the RFC's own: a Byte Sequence may omit its
// "=" padding and may carry non-zero pad bits (RFC 9651 §4.2.7 says parsers
// SHOULD NOT fail on either).

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// sfKind is the type of a bare item.
type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
	sfDate
	sfDisplayString
)

var sfKindNames = [...]string{
	sfInteger:       "an Integer",
	sfDecimal:       "a Decimal",
	sfString:        "a String",
	sfToken:         "a Token",
	sfBytes:         "a Byte Sequence",
	sfBoolean:       "a Boolean",
	sfDate:          "a Date",
	sfDisplayString: "a Display String",
}

func (k sfKind) String() string {
	if int(k) < len(sfKindNames) && sfKindNames[k] != "" {
		return sfKindNames[k]
	}
	return "an unknown type"
}

// sfBare is a bare item. num holds an Integer, a Date (Unix seconds), a
// Boolean (0 or 1) or a Decimal in thousandths; str holds a String, a Token or
// a Display String (UTF-8); bytes holds a Byte Sequence (non-nil, possibly
// empty).
type sfBare struct {
	kind  sfKind
	num   int64
	str   string
	bytes []byte
}

// sfParam is one parameter. Keys are unique within a parameter list: a later
// duplicate overwrites the earlier value in place, as RFC 9651 §4.2.3.2 says.
type sfParam struct {
	key string
	val sfBare
}

// sfItem is a bare item with its parameters.
type sfItem struct {
	bare   sfBare
	params []sfParam
}

// sfMember is one List member: an Item, or (isInner) an Inner List whose
// items are in inner. params are the Item's or the Inner List's parameters.
type sfMember struct {
	isInner bool
	bare    sfBare
	inner   []sfItem
	params  []sfParam
}

// lookupParam returns the value of key in ps.
func lookupParam(ps []sfParam, key string) (sfBare, bool) {
	for i := range ps {
		if ps[i].key == key {
			return ps[i].val, true
		}
	}
	return sfBare{}, false
}

// SyntaxError reports a field value that is not a valid RFC 9651 List. The
// whole field must then be ignored (RFC 9651 §4.2, draft-ietf-httpapi-
// ratelimit-headers §7).
type SyntaxError struct {
	Offset int    // byte offset in the combined field value (lines joined by ", ")
	Msg    string // what was wrong
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return "rlheader: invalid structured field at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// sfParser is the state of one parse.
type sfParser struct {
	s string
	i int
	// lenientB64 is set when a Byte Sequence had missing (but not excess)
	// padding. The tests use it: the independent parser they compare with
	// requires padding, which RFC 9651 says parsers should not.
	lenientB64 bool
}

// parseSFList parses the field lines as one RFC 9651 List, joined with
// ", " as §4.2 requires.
func parseSFList(lines []string) ([]sfMember, error) {
	p := sfParser{s: strings.Join(lines, ", ")}
	return p.list()
}

func (p *sfParser) fail(msg string) error {
	return &SyntaxError{Offset: p.i, Msg: msg}
}

func (p *sfParser) eof() bool { return p.i >= len(p.s) }

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// list implements RFC 9651 §4.2 (top level, for a List) and §4.2.1.
func (p *sfParser) list() ([]sfMember, error) {
	p.skipSP()
	var out []sfMember
	for !p.eof() {
		m, err := p.member()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
		p.skipOWS()
		if p.eof() {
			return out, nil
		}
		if p.s[p.i] != ',' {
			return nil, p.fail("expected ',' after a list member")
		}
		p.i++
		p.skipOWS()
		if p.eof() {
			return nil, p.fail("trailing ',' in a list")
		}
	}
	return out, nil
}

// member implements RFC 9651 §4.2.1.1.
func (p *sfParser) member() (sfMember, error) {
	if p.s[p.i] == '(' {
		inner, params, err := p.innerList()
		return sfMember{isInner: true, inner: inner, params: params}, err
	}
	it, err := p.item()
	return sfMember{bare: it.bare, params: it.params}, err
}

// innerList implements RFC 9651 §4.2.1.2.
func (p *sfParser) innerList() ([]sfItem, []sfParam, error) {
	p.i++ // '('
	items := []sfItem{}
	for !p.eof() {
		p.skipSP()
		if p.eof() {
			break
		}
		if p.s[p.i] == ')' {
			p.i++
			params, err := p.params()
			return items, params, err
		}
		it, err := p.item()
		if err != nil {
			return nil, nil, err
		}
		items = append(items, it)
		if p.eof() || (p.s[p.i] != ' ' && p.s[p.i] != ')') {
			return nil, nil, p.fail("expected SP or ')' in an inner list")
		}
	}
	return nil, nil, p.fail("unterminated inner list")
}

// item implements RFC 9651 §4.2.3.
func (p *sfParser) item() (sfItem, error) {
	b, err := p.bare()
	if err != nil {
		return sfItem{}, err
	}
	ps, err := p.params()
	return sfItem{bare: b, params: ps}, err
}

// params implements RFC 9651 §4.2.3.2.
func (p *sfParser) params() ([]sfParam, error) {
	var ps []sfParam
	for !p.eof() && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		val := sfBare{kind: sfBoolean, num: 1}
		if !p.eof() && p.s[p.i] == '=' {
			p.i++
			if val, err = p.bare(); err != nil {
				return nil, err
			}
		}
		dup := false
		for j := range ps {
			if ps[j].key == key {
				ps[j].val = val
				dup = true
				break
			}
		}
		if !dup {
			ps = append(ps, sfParam{key: key, val: val})
		}
	}
	return ps, nil
}

func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || ('A' <= c && c <= 'Z') }
func isDigit(c byte) bool   { return '0' <= c && c <= '9' }

// key implements RFC 9651 §4.2.3.3.
func (p *sfParser) key() (string, error) {
	if p.eof() || !(isLCAlpha(p.s[p.i]) || p.s[p.i] == '*') {
		return "", p.fail("a key must start with a lower-case letter or '*'")
	}
	start := p.i
	p.i++
	for !p.eof() {
		c := p.s[p.i]
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

// bare implements RFC 9651 §4.2.3.1.
func (p *sfParser) bare() (sfBare, error) {
	if p.eof() {
		return sfBare{}, p.fail("missing bare item")
	}
	switch c := p.s[p.i]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		return p.token(), nil
	case c == ':':
		return p.byteSeq()
	case c == '?':
		return p.boolean()
	case c == '@':
		return p.date()
	case c == '%':
		return p.displayString()
	}
	return sfBare{}, p.fail("unexpected character " + strconv.QuoteRune(rune(p.s[p.i])))
}

// number implements RFC 9651 §4.2.4. A Decimal is returned in thousandths.
func (p *sfParser) number() (sfBare, error) {
	neg := false
	if p.s[p.i] == '-' {
		neg = true
		p.i++
	}
	if p.eof() || !isDigit(p.s[p.i]) {
		return sfBare{}, p.fail("a number must start with a digit")
	}
	start := p.i
	dot := -1
scan:
	for !p.eof() {
		c := p.s[p.i]
		switch {
		case isDigit(c):
		case c == '.' && dot < 0:
			if p.i-start > 12 {
				return sfBare{}, p.fail("a Decimal has more than 12 integer digits")
			}
			dot = p.i
		default:
			break scan
		}
		p.i++
		if n := p.i - start; (dot < 0 && n > 15) || n > 16 {
			return sfBare{}, p.fail("number too long")
		}
	}
	if dot < 0 {
		v := digitsValue(p.s[start:p.i])
		if neg {
			v = -v
		}
		return sfBare{kind: sfInteger, num: v}, nil
	}
	frac := p.s[dot+1 : p.i]
	if len(frac) == 0 {
		return sfBare{}, p.fail("a Decimal ends with '.'")
	}
	if len(frac) > 3 {
		return sfBare{}, p.fail("a Decimal has more than 3 fractional digits")
	}
	v := digitsValue(p.s[start:dot]) * 1000
	f := digitsValue(frac)
	for n := len(frac); n < 3; n++ {
		f *= 10
	}
	v += f
	if neg {
		v = -v
	}
	return sfBare{kind: sfDecimal, num: v}, nil
}

// digitsValue is the value of at most 15 ASCII digits.
func digitsValue(s string) int64 {
	var v int64
	for i := 0; i < len(s); i++ {
		v = v*10 + int64(s[i]-'0')
	}
	return v
}

// str implements RFC 9651 §4.2.5. Without escapes the result shares the
// input's memory.
func (p *sfParser) str() (sfBare, error) {
	p.i++ // '"'
	start := p.i
	var buf []byte // non-nil once an escape was seen
	for !p.eof() {
		c := p.s[p.i]
		switch {
		case c == '\\':
			if buf == nil {
				buf = append(make([]byte, 0, len(p.s)-start), p.s[start:p.i]...)
			}
			p.i++
			if p.eof() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return sfBare{}, p.fail(`a String may only escape '"' and '\'`)
			}
			buf = append(buf, p.s[p.i])
		case c == '"':
			var v string
			if buf != nil {
				v = string(buf)
			} else {
				v = p.s[start:p.i]
			}
			p.i++
			return sfBare{kind: sfString, str: v}, nil
		case c < 0x20 || c > 0x7e:
			return sfBare{}, p.fail("a String may only hold printable ASCII")
		default:
			if buf != nil {
				buf = append(buf, c)
			}
		}
		p.i++
	}
	return sfBare{}, p.fail("unterminated String")
}

// isTChar reports whether c is a tchar (RFC 9110 §5.6.2).
func isTChar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// token implements RFC 9651 §4.2.6. The caller has checked the first byte.
func (p *sfParser) token() sfBare {
	start := p.i
	p.i++
	for !p.eof() {
		c := p.s[p.i]
		if !isTChar(c) && c != ':' && c != '/' {
			break
		}
		p.i++
	}
	return sfBare{kind: sfToken, str: p.s[start:p.i]}
}

// byteSeq implements RFC 9651 §4.2.7.
func (p *sfParser) byteSeq() (sfBare, error) {
	p.i++ // ':'
	start := p.i
	for !p.eof() {
		c := p.s[p.i]
		if c == ':' {
			b, canonical, err := decodeBase64(p.s[start:p.i])
			if err != nil {
				return sfBare{}, p.fail("a Byte Sequence is not valid base64")
			}
			if !canonical {
				p.lenientB64 = true
			}
			p.i++
			return sfBare{kind: sfBytes, bytes: b}, nil
		}
		if !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
			return sfBare{}, p.fail("a Byte Sequence may only hold base64 characters")
		}
		p.i++
	}
	return sfBare{}, p.fail("unterminated Byte Sequence")
}

var errBase64 = errors.New("rlheader: invalid base64")

// decodeBase64 decodes standard base64 whose padding may be missing or short
// (but not excessive) and whose pad bits may be non-zero. canonical reports
// whether the padding was complete. The result is never nil.
func decodeBase64(s string) (b []byte, canonical bool, err error) {
	body := strings.TrimRight(s, "=")
	if strings.IndexByte(body, '=') >= 0 {
		return nil, false, errBase64
	}
	rem := len(body) % 4
	if rem == 1 {
		return nil, false, errBase64
	}
	need := (4 - rem) % 4
	pads := len(s) - len(body)
	if pads > need {
		return nil, false, errBase64
	}
	b = make([]byte, base64.RawStdEncoding.DecodedLen(len(body)))
	n, err := base64.RawStdEncoding.Decode(b, []byte(body))
	if err != nil {
		return nil, false, errBase64
	}
	return b[:n], pads == need, nil
}

// boolean implements RFC 9651 §4.2.8.
func (p *sfParser) boolean() (sfBare, error) {
	p.i++ // '?'
	if !p.eof() && (p.s[p.i] == '0' || p.s[p.i] == '1') {
		v := int64(p.s[p.i] - '0')
		p.i++
		return sfBare{kind: sfBoolean, num: v}, nil
	}
	return sfBare{}, p.fail("a Boolean must be ?0 or ?1")
}

// date implements RFC 9651 §4.2.9.
func (p *sfParser) date() (sfBare, error) {
	p.i++ // '@'
	if p.eof() {
		return sfBare{}, p.fail("missing Date value")
	}
	n, err := p.number()
	if err != nil {
		return sfBare{}, err
	}
	if n.kind != sfInteger {
		return sfBare{}, p.fail("a Date must be an Integer")
	}
	return sfBare{kind: sfDate, num: n.num}, nil
}

func unhexLower(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// displayString implements RFC 9651 §4.2.10.
func (p *sfParser) displayString() (sfBare, error) {
	if p.i+1 >= len(p.s) || p.s[p.i+1] != '"' {
		return sfBare{}, p.fail(`a Display String must start with %"`)
	}
	p.i += 2
	var buf []byte
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch {
		case c < 0x20 || c > 0x7e:
			return sfBare{}, p.fail("a Display String may only hold printable ASCII")
		case c == '%':
			if p.i+1 >= len(p.s) {
				return sfBare{}, p.fail("truncated percent-encoding")
			}
			hi, ok1 := unhexLower(p.s[p.i])
			lo, ok2 := unhexLower(p.s[p.i+1])
			if !ok1 || !ok2 {
				return sfBare{}, p.fail("percent-encoding must be two lower-case hex digits")
			}
			buf = append(buf, hi<<4|lo)
			p.i += 2
		case c == '"':
			if !utf8.Valid(buf) {
				return sfBare{}, p.fail("a Display String is not valid UTF-8")
			}
			return sfBare{kind: sfDisplayString, str: string(buf)}, nil
		default:
			buf = append(buf, c)
		}
	}
	return sfBare{}, p.fail("unterminated Display String")
}
