package request

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PathSemantics says which spellings of a canonical path an application
// takes for the same resource, beyond those the canonical form merges
// already: a case-insensitive server serves "/LOGIN" as "/login", a
// servlet container "/login;jsessionid=1" as "/login". A limit in front
// of such an application must count those spellings as one, so every
// face folds a canonical path by its upstream's semantics (Fold) before
// it matches routes or builds keys from it; the request is forwarded as
// it was sent.
//
// The zero value is PathStrict, which folds nothing.
type PathSemantics uint8

// The path semantics, as a configuration names them (path_semantics:).
const (
	// PathStrict (strict) takes the canonical path as it is: the path's
	// case and every byte of a segment count. It is right for
	// applications that route on the exact path, as Go's ServeMux,
	// NGINX, Express, Flask and Rails do.
	PathStrict PathSemantics = iota
	// PathCaseInsensitive (case_insensitive) folds letters to lower
	// case, as Unicode case folding relates them ("/LOGIN", "/Login"
	// and "/login" are one path; so are "/ADMIN" and "/admın", which
	// .NET's ordinal ignore-case comparison merges through "I"): ASP.NET
	// Core's routing and other case-insensitive routers.
	PathCaseInsensitive
	// PathIIS (iis) is PathCaseInsensitive, plus what Windows does to a
	// file name behind IIS: a backslash ("\" or "%5C") separates
	// segments, and trailing spaces and dots of a segment are dropped
	// ("/login%20" and "/login." are "/login").
	PathIIS
	// PathServlet (servlet) drops a segment's path parameters, from its
	// first ";" to its end, as Tomcat and Jetty do before they map a
	// request to a servlet ("/login;jsessionid=1" is "/login",
	// "/a/..;x/b" is "/b"), and then the white space and control
	// characters at either end of a segment, as String.trim does and as
	// Spring MVC's path matcher did by default before 4.3 ("/login%20"
	// and "/login%09" are "/login"). An encoded ";" ("%3B") is a ";" to
	// the canonical form, so it starts parameters too: Tomcat reads it as
	// part of the name ("/login%3Bx" is not its "/login"), and the limit
	// then counts that request against "/login" rather than let it
	// through uncounted.
	PathServlet
)

var pathSemanticsNames = [...]string{
	PathStrict:          "strict",
	PathCaseInsensitive: "case_insensitive",
	PathIIS:             "iis",
	PathServlet:         "servlet",
}

// PathSemanticsNames lists the names ParsePathSemantics accepts, for
// error messages: "strict, case_insensitive, iis or servlet".
const PathSemanticsNames = "strict, case_insensitive, iis or servlet"

// ErrPathSemantics is returned by ParsePathSemantics for a name it does
// not know.
var ErrPathSemantics = errors.New("unknown path semantics (want " + PathSemanticsNames + ")")

// ParsePathSemantics returns the semantics a configuration names: "strict"
// (or ""), "case_insensitive", "iis" or "servlet". Any other name is
// ErrPathSemantics.
func ParsePathSemantics(name string) (PathSemantics, error) {
	if name == "" {
		return PathStrict, nil
	}
	for i, n := range pathSemanticsNames {
		if n == name {
			return PathSemantics(i), nil
		}
	}
	return PathStrict, ErrPathSemantics
}

// String returns the semantics' configuration name, such as "servlet", or
// "unknown" for a value out of range.
func (s PathSemantics) String() string {
	if int(s) < len(pathSemanticsNames) {
		return pathSemanticsNames[s]
	}
	return "unknown"
}

// Fold returns the canonical path p (a Path result) as an application
// with the semantics s reads it, in canonical form again: the one path
// that every spelling the application takes for the same resource comes
// to. PathStrict, and any s for a path with nothing to fold, return p
// itself without allocating. Fold is idempotent (Fold(Fold(p)) ==
// Fold(p)), works in one pass over p plus Path's over the result, and
// returns p as it is when p is not canonical.
func (s PathSemantics) Fold(p string) string {
	if s == PathStrict || s >= PathSemantics(len(pathSemanticsNames)) || !s.mayFold(p) {
		return p
	}
	b := make([]byte, 0, len(p)+8)
	var seg []byte // a segment, decoded
	for i := 0; i < len(p); {
		if p[i] != '/' {
			return p
		}
		j := i + 1
		for j < len(p) && p[j] != '/' {
			j++
		}
		var ok bool
		if seg, ok = appendUnescaped(seg[:0], p[i+1:j]); !ok {
			return p
		}
		b = s.appendFolded(b, seg)
		i = j
	}
	if len(b) == 0 {
		return "/"
	}
	f, err := Path(string(b)) // dot and empty segments the folding made
	if err != nil {
		return p
	}
	return f
}

// mayFold reports whether s could change the canonical path p: false
// saves Fold its copy for most paths.
func (s PathSemantics) mayFold(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch s {
		case PathCaseInsensitive, PathIIS:
			if 'A' <= c && c <= 'Z' || c == '%' && i+1 < len(p) && p[i+1] >= '8' { // or a non-ASCII byte
				return true
			}
			if s == PathIIS && (c == '%' && strings.HasPrefix(p[i:], "%5C") ||
				(c == '.' || c == '%' && strings.HasPrefix(p[i:], "%20")) && endsSegment(p, i)) {
				return true
			}
		case PathServlet:
			if c == ';' || c == '%' && i+1 < len(p) && (p[i+1] <= '1' || strings.HasPrefix(p[i:], "%20")) {
				return true
			}
		}
	}
	return false
}

// endsSegment reports whether the dot or escape at p[i] is the last of
// its segment.
func endsSegment(p string, i int) bool {
	if p[i] == '%' {
		i += 2
	}
	return i+1 == len(p) || p[i+1] == '/'
}

// appendUnescaped appends the escaped segment seg, decoded, to b; false
// for a bad escape.
func appendUnescaped(b []byte, seg string) ([]byte, bool) {
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c == '%' {
			if i+2 >= len(seg) {
				return b, false
			}
			hi, ok1 := unhex(seg[i+1])
			lo, ok2 := unhex(seg[i+2])
			if !ok1 || !ok2 {
				return b, false
			}
			c = hi<<4 | lo
			i += 2
		}
		b = append(b, c)
	}
	return b, true
}

// appendFolded appends "/" and the decoded segment seg, folded by s and
// escaped, to b (several segments for a backslash under PathIIS).
func (s PathSemantics) appendFolded(b []byte, seg []byte) []byte {
	switch s {
	case PathIIS:
		for {
			part := seg
			k := strings.IndexByte(string(seg), '\\')
			if k >= 0 {
				part = seg[:k]
			}
			part = trimWindows(part)
			b = appendEscaped(append(b, '/'), foldCase(part))
			if k < 0 {
				return b
			}
			seg = seg[k+1:]
		}
	case PathCaseInsensitive:
		return appendEscaped(append(b, '/'), foldCase(seg))
	case PathServlet:
		if k := strings.IndexByte(string(seg), ';'); k >= 0 {
			seg = seg[:k]
		}
		return appendEscaped(append(b, '/'), trimJava(seg))
	}
	return appendEscaped(append(b, '/'), seg)
}

// trimWindows drops the trailing spaces and dots of a file name, as
// Windows does, but keeps a "." or ".." left once the spaces are gone,
// which Path then resolves as the dot segment the server takes it for.
func trimWindows(seg []byte) []byte {
	for len(seg) > 0 && seg[len(seg)-1] == ' ' {
		seg = seg[:len(seg)-1]
	}
	if string(seg) == "." || string(seg) == ".." {
		return seg
	}
	for len(seg) > 0 && (seg[len(seg)-1] == ' ' || seg[len(seg)-1] == '.') {
		seg = seg[:len(seg)-1]
	}
	return seg
}

// trimJava drops the bytes up to U+0020 at either end of seg, as Java's
// String.trim does.
func trimJava(seg []byte) []byte {
	for len(seg) > 0 && seg[0] <= ' ' {
		seg = seg[1:]
	}
	for len(seg) > 0 && seg[len(seg)-1] <= ' ' {
		seg = seg[:len(seg)-1]
	}
	return seg
}

// foldCase returns seg with every letter in its case-folded form: ASCII
// letters in lower case, and, when seg is valid UTF-8, every rune as
// foldRune maps it. Invalid UTF-8 has its ASCII letters folded only. It
// folds ASCII in place, in seg.
func foldCase(seg []byte) []byte {
	ascii := true
	for _, c := range seg {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii || !utf8.Valid(seg) {
		for i, c := range seg {
			if 'A' <= c && c <= 'Z' {
				seg[i] = c + 'a' - 'A'
			}
		}
		return seg
	}
	out := make([]byte, 0, len(seg)+4)
	for _, r := range string(seg) {
		out = utf8.AppendRune(out, foldRune(r))
	}
	return out
}

// foldRune returns the one rune that stands for r and every rune that
// differs from it only in case: the least rune of the Unicode case
// folding orbit of r's upper case, in lower case when it is an ASCII
// letter. Taking the upper case first merges what .NET's ordinal
// ignore-case comparison merges ("ı" and "i" both upper-case to "I").
func foldRune(r rune) rune {
	u := unicode.ToUpper(r)
	least := u
	for f := unicode.SimpleFold(u); f != u; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	if 'A' <= least && least <= 'Z' {
		least += 'a' - 'A'
	}
	return least
}

// appendEscaped appends the decoded segment seg to b escaped as a
// canonical path holds it: safe bytes raw, others (and "/") as %XX.
func appendEscaped(b, seg []byte) []byte {
	for _, c := range seg {
		if safe[c] {
			b = append(b, c)
		} else {
			b = append(b, '%', hexUpper[c>>4], hexUpper[c&15])
		}
	}
	return b
}
