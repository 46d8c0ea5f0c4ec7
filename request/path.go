package request

import "strings"

// Path returns the escaped path p (a request target's path, without the
// query) in canonical form; see the package documentation. It allocates
// nothing when p is already canonical, and works in one pass over p plus
// one over the result otherwise, so its cost is bounded by len(p).
func Path(p string) (string, error) {
	if p == "" {
		return "/", nil
	}
	if p[0] != '/' {
		return "", &Error{"path", "does not start with /"}
	}
	if isCanonicalPath(p) {
		return p, nil
	}
	// Pass 1: one spelling per octet (decode, then escape what is not
	// safe raw), into b.
	b := make([]byte, 0, len(p)+8)
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%':
			if i+2 >= len(p) {
				return "", &Error{"path", "bad escape"}
			}
			hi, ok1 := unhex(p[i+1])
			lo, ok2 := unhex(p[i+2])
			if !ok1 || !ok2 {
				return "", &Error{"path", "bad escape"}
			}
			i += 2
			d := hi<<4 | lo
			if d == 0 {
				return "", &Error{"path", "NUL"}
			}
			if d != '/' && safe[d] {
				b = append(b, d)
			} else {
				b = append(b, '%', hexUpper[d>>4], hexUpper[d&15])
			}
		case c == '/' || safe[c]:
			b = append(b, c)
		case c == 0:
			return "", &Error{"path", "NUL"}
		default:
			b = append(b, '%', hexUpper[c>>4], hexUpper[c&15])
		}
	}
	return removeDotSegments(b), nil // pass 2
}

// removeDotSegments returns the path b (escaped, one spelling per octet)
// without empty and "." segments, with ".." resolved and without a last
// "%2F" segment, working in place in b: "/" for nothing left.
func removeDotSegments(b []byte) string {
	out := b[:0]
	for i := 0; i < len(b); {
		j := i + 1 // b[i] is '/'
		for j < len(b) && b[j] != '/' {
			j++
		}
		seg := b[i+1 : j]
		switch string(seg) {
		case "", ".":
		case "..":
			k := len(out) - 1
			for k >= 0 && out[k] != '/' {
				k--
			}
			out = out[:max(k, 0)]
		default:
			out = append(out, '/')
			out = append(out, seg...) // copy within b, never ahead of its source
		}
		i = j
	}
	for len(out) >= len(slashSegment) && string(out[len(out)-len(slashSegment):]) == slashSegment {
		out = out[:len(out)-len(slashSegment)] // ServeMux's trailing slash
	}
	if len(out) == 0 {
		return "/"
	}
	return string(out)
}

// slashSegment is a last segment that is an encoded slash alone, which
// ServeMux reads as a trailing slash ("/a/%2F" matches the pattern
// "/a/{$}"), so a canonical path ends in none.
const slashSegment = "/%2F"

// isCanonicalPath reports whether p, which starts with "/", is canonical
// already: only safe bytes, "/" and upper-case escapes of unsafe octets
// (or of "/"), no empty, "." or ".." segment, no trailing slash and no
// last segment that is "%2F" alone.
func isCanonicalPath(p string) bool {
	if len(p) > 1 && p[len(p)-1] == '/' || strings.HasSuffix(p, slashSegment) {
		return false
	}
	segStart := 1
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			switch seg := p[segStart:i]; seg {
			case ".", "..":
				return false
			case "":
				if len(p) > 1 {
					return false
				}
			}
			segStart = i + 1
			continue
		}
		c := p[i]
		if c == '%' {
			if i+2 >= len(p) {
				return false
			}
			hi, ok1 := unhexUpper(p[i+1])
			lo, ok2 := unhexUpper(p[i+2])
			if !ok1 || !ok2 {
				return false
			}
			if d := hi<<4 | lo; d == 0 || d != '/' && safe[d] {
				return false
			}
			i += 2
			continue
		}
		if !safe[c] {
			return false
		}
	}
	return true
}

const hexUpper = "0123456789ABCDEF"

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unhexUpper is unhex without lower-case digits, which are not canonical.
func unhexUpper(c byte) (byte, bool) {
	if 'a' <= c && c <= 'f' {
		return 0, false
	}
	return unhex(c)
}

// safe marks the octets a canonical path holds raw rather than escaped:
// RFC 3986's unreserved characters and sub-delims, ":" and "@" (pchar
// without pct-encoded). "/" is not among them: raw it separates segments,
// decoded from %2F it stays escaped.
var safe = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
			b == '-' || b == '.' || b == '_' || b == '~' || // unreserved
			b == '!' || b == '$' || b == '&' || b == '\'' || b == '(' || b == ')' ||
			b == '*' || b == '+' || b == ',' || b == ';' || b == '=' || // sub-delims
			b == ':' || b == '@'
	}
	return t
}()

// DecodeSlashes returns the canonical path p with every "%2F" read as a
// slash, in canonical form again: "/admin%2Fx" is "/admin/x" and
// "/a%2F..%2Flogin" is "/login". It is how NGINX, and applications that
// decode the whole path before routing (WSGI servers, for one), read an
// encoded slash, where ServeMux keeps it inside its segment. p without
// "%2F" is returned as is.
func DecodeSlashes(p string) string {
	if !strings.Contains(p, "%2F") {
		return p
	}
	d, err := Path(strings.ReplaceAll(p, "%2F", "/"))
	if err != nil { // unreachable: p's other escapes are canonical
		return p
	}
	return d
}
