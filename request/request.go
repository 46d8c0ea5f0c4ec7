// Package request computes the one canonical form of an HTTP request that
// everything matching or keying on a request looks at: the proxy's routes
// and keys, forward auth's descriptors, httplimit's key functions. A limit
// that a client can dodge by spelling a request differently is no limit, so
// every spelling that an application could take for the same request must
// come out the same here.
//
// # The rules
//
// Method: a method that is not an RFC 9110 token is malformed. A valid
// method is upper-cased (ASCII): "post" and "pOsT" are POST. Methods are
// case-sensitive in HTTP, but many applications (Werkzeug and Flask, Rack,
// Express) upper-case the method before they route, so a "post" would reach
// their POST handler; counting it as POST closes that gap whatever the
// application does. (NGINX answers 400 instead; upper-casing refuses no
// request that an application accepts, and forward auth, which cannot know
// how the application reads the method, gives the same answer as the
// proxy.)
//
// Path: the path of the request target, as sent (escaped). Every
// percent-encoded octet is decoded, and written back raw when it is an
// unreserved character, a sub-delim, ":" or "@" (so "%6Cogin" is "login"
// and "%28" is "("), or as %XX in upper-case hex otherwise (so "%c3%a9"
// and a raw "é" are both "%C3%A9"). "%2F" stays "%2F": an encoded slash is
// part of its segment, as net/http's ServeMux reads it (DecodeSlashes gives
// the other reading, NGINX's, which the proxy tries first and forward auth
// uses). Then empty
// segments ("//"), "." and ".." segments (also when written "%2E") are
// removed as RFC 3986 section 5.2.4 removes dot segments, and a trailing
// slash is dropped: "/login/" is "/login", because ServeMux sends "/tree" to
// "/tree/" and many frameworks route "/login/" to "/login", so to a limit
// they are one resource. A last segment that is "%2F" alone is such a
// trailing slash too, as ServeMux reads it ("/a/%2F" matches the pattern
// "/a/{$}", "/%2F" the root "/{$}"), and dropped with it: "/a/%2F" is "/a"
// and "/%2F" is "/". The root stays "/". An invalid escape ("%zz") or a
// path that does not start with "/" is malformed, as is a NUL ("%00"),
// where C and PHP applications end the path and NGINX answers 400; "" is
// "/". (A raw "#" in a target is part of the path, "%23": it is sent on
// escaped, so no upstream reads it as a fragment.)
//
// Host: the Host header's host, in lower case, without its port and
// without one trailing dot, as NGINX's $host: "API.Example.com.:8080" is
// "api.example.com". A name is dot-separated labels of letters, digits,
// "-" and "_"; anything else (an empty label as in "api.example.com..",
// another character, a port that is not a number up to 65535) is
// malformed. An IPv6 literal keeps its brackets, in RFC 5952 form
// ("[2001:db8::1]"); a zone is malformed. "" stays "" (HTTP/1.0 has no
// Host).
//
// Some applications merge more spellings of a path than any server must:
// IIS and ASP.NET ignore case, servlet containers drop ";" path
// parameters. PathSemantics.Fold folds a canonical path as such an
// application reads it; the proxy's routes and forward auth both fold
// with it, as their configuration's path_semantics says, and the strict
// default folds nothing.
//
// The form is idempotent: canonicalising a Canonical's fields again
// changes nothing. Two requests that a ServeMux routes to the same handler
// have the same canonical form; the form merges more than ServeMux does
// (the method's case, the host's case and dot, "%2E" segments, a trailing
// slash), never less.
//
// A malformed request is answered 400 by both faces. Computing the form of
// a request that is already canonical allocates nothing.
package request

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
)

// Canonical is the canonical form of a request; see the package
// documentation for the rules. The zero value is the form of no request
// (an empty method is never canonical).
type Canonical struct {
	// Method is the method in upper case, an RFC 9110 token: "POST".
	Method string
	// Host is the host without port or trailing dot, in lower case, IPv6
	// in brackets: "api.example.com", "[2001:db8::1]"; "" when the request
	// named none.
	Host string
	// Path is the path, escaped as described in the package
	// documentation: no empty, "." or ".." segment, no trailing slash
	// (save the root "/"): "/login", "/users/a%2Fb".
	Path string
}

// ErrMalformed is wrapped by every error of this package: the request
// cannot be put in canonical form, and should be answered 400.
var ErrMalformed = errors.New("malformed request")

// Error says which part of a request is malformed and why. It never
// holds the request's bytes, which may be large or hostile. errors.Is(err,
// ErrMalformed) holds for every *Error.
type Error struct {
	// Part is "method", "path" or "host".
	Part string
	// Reason is a short phrase: "empty label", "bad escape".
	Reason string
}

// Error returns "malformed request: <part>: <reason>".
func (e *Error) Error() string { return "malformed request: " + e.Part + ": " + e.Reason }

// Unwrap returns ErrMalformed.
func (e *Error) Unwrap() error { return ErrMalformed }

// New returns the canonical form of a request with method, path (the
// escaped path of its target, without the query) and host (the Host
// header, port allowed). The error, an *Error, names the first part that
// is malformed. It allocates nothing when all three are already
// canonical.
func New(method, path, host string) (Canonical, error) {
	var (
		c   Canonical
		err error
	)
	if c.Method, err = Method(method); err != nil {
		return Canonical{}, err
	}
	if c.Path, err = Path(path); err != nil {
		return Canonical{}, err
	}
	if c.Host, err = Host(host); err != nil {
		return Canonical{}, err
	}
	return c, nil
}

// FromRequest returns the canonical form of r: New(r.Method,
// r.URL.EscapedPath(), r.Host). r and r.URL must not be nil.
func FromRequest(r *http.Request) (Canonical, error) {
	return New(r.Method, r.URL.EscapedPath(), r.Host)
}

type ctxKey struct{}

// canonCtx is a context that carries a Canonical, and optionally one more
// value: one allocation where context.WithValue and a *Canonical would
// take two (three with the value).
type canonCtx struct {
	context.Context
	c        Canonical
	key, val any
}

func (x *canonCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return &x.c
	}
	if x.key != nil && key == x.key {
		return x.val
	}
	return x.Context.Value(key)
}

// NewContext returns a copy of ctx that carries c, so that the code a
// request passes through later finds its form (Of) instead of computing
// it again.
func NewContext(ctx context.Context, c Canonical) context.Context {
	return &canonCtx{Context: ctx, c: c}
}

// NewContextValue is NewContext with one more value, as
// context.WithValue(NewContext(ctx, c), key, val) would carry it, in the
// same allocation. key must be comparable and not nil.
func NewContextValue(ctx context.Context, c Canonical, key, val any) context.Context {
	return &canonCtx{Context: ctx, c: c, key: key, val: val}
}

// FromContext returns the form NewContext stored in ctx, or nil.
func FromContext(ctx context.Context) *Canonical {
	c, _ := ctx.Value(ctxKey{}).(*Canonical)
	return c
}

// Of returns r's canonical form: the one stored in its context by
// NewContext when there is one (the proxy stores it once it has routed
// the request), else FromRequest's.
func Of(r *http.Request) (Canonical, error) {
	if c := FromContext(r.Context()); c != nil {
		return *c, nil
	}
	return FromRequest(r)
}

// Method returns m in canonical form: an RFC 9110 token in ASCII upper
// case. It allocates only when m has a lower-case letter.
func Method(m string) (string, error) {
	if m == "" {
		return "", &Error{"method", "empty"}
	}
	lower := false
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !tchar[c] {
			return "", &Error{"method", "not a token"}
		}
		lower = lower || 'a' <= c && c <= 'z'
	}
	if !lower {
		return m, nil
	}
	return strings.ToUpper(m), nil // ASCII only: every byte is a tchar
}

// Host returns the host of a Host header in canonical form; see the
// package documentation. It allocates only when the name has an
// upper-case letter or an IPv6 literal is not in RFC 5952 form.
func Host(h string) (string, error) {
	if h == "" {
		return "", nil
	}
	if h[0] == '[' {
		return ipv6Host(h)
	}
	name := h
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if !validPort(h[i+1:]) {
			return "", &Error{"host", "bad port"}
		}
		name = h[:i]
	}
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return "", &Error{"host", "empty name"}
	}
	upper := false
	label := 0 // length of the current label
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return "", &Error{"host", "empty label"}
			}
			label = 0
			continue
		case 'A' <= c && c <= 'Z':
			upper = true
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return "", &Error{"host", "bad character"}
		}
		label++
	}
	if label == 0 {
		return "", &Error{"host", "empty label"}
	}
	if !upper {
		return name, nil
	}
	return strings.ToLower(name), nil
}

// ipv6Host canonicalises a Host that starts with "[".
func ipv6Host(h string) (string, error) {
	end := strings.IndexByte(h, ']')
	if end < 0 {
		return "", &Error{"host", "unterminated IPv6 literal"}
	}
	if rest := h[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
		return "", &Error{"host", "bad port"}
	}
	lit := h[1:end]
	a, err := netip.ParseAddr(lit)
	if err != nil || !a.Is6() || a.Zone() != "" || strings.IndexByte(lit, '%') >= 0 {
		return "", &Error{"host", "bad IPv6 literal"}
	}
	var buf [48]byte
	if s := a.AppendTo(buf[:0]); string(s) == lit {
		return h[:end+1], nil
	}
	return "[" + a.String() + "]", nil
}

// validPort reports whether p is a port: empty (RFC 3986 allows "host:")
// or a decimal number up to 65535.
func validPort(p string) bool {
	if len(p) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
		n = n*10 + int(p[i]-'0')
	}
	return n <= 65535
}

// tchar marks the bytes of an RFC 9110 token.
var tchar = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
	}
	return t
}()
