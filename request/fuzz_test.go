package request_test

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/request"
)

// exactPatterns have no wildcard and no subtree: a ServeMux routes a
// request to one of them only when its decoded, cleaned path is the
// pattern's, so two requests routed to the same one must have the same
// canonical path (and host, and method, where the pattern names them).
var exactPatterns = []string{
	"/login", "POST /submit", "api.example.com/login", "/a/b/c", "/a%2Fb", "/caf%C3%A9", "/{$}",
}

// routingPatterns mix subtrees, wildcards, methods and hosts, as an
// application's routes do.
var routingPatterns = []string{
	"/", "/api/", "/users/{id}", "/users/{id}/posts", "GET /files/{path...}", "api.example.com/",
	"/login", "POST /submit", "/a%2Fb/{x}",
}

func newMux(patterns []string) *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.Handle(p, http.NotFoundHandler())
	}
	return mux
}

// patternParts splits a ServeMux pattern into method, host and path.
func patternParts(p string) (method, host, path string) {
	if m, rest, ok := strings.Cut(p, " "); ok {
		method, p = m, rest
	}
	i := strings.IndexByte(p, '/')
	return method, p[:i], strings.TrimSuffix(p[i:], "{$}") // "/{$}" is exactly "/"
}

// FuzzCanonical checks the two invariants of the canonical form on any
// method, escaped path and Host:
//
//  1. canonicalising twice changes nothing, and every other spelling of a
//     canonical request (doubled and trailing slashes, dot segments,
//     escaped characters, the method's and host's case, a trailing dot, a
//     port) comes back to it;
//  2. two requests that a ServeMux routes to the same handler get the
//     same canonical form: for exact patterns, the canonical path, host and
//     method are the pattern's; for any pattern, the canonical form routes
//     where the request does (when the request is spelled as ServeMux
//     reads it: no %2E, no trailing slash (nor a last segment %2F, which
//     ServeMux reads as one), upper-case method, lower-case host; the form
//     merges those where ServeMux does not);
//  3. every PathSemantics folds the canonical path to a canonical path
//     that it folds no further, and spellings that its upstream takes for
//     the same resource fold to the same path: under case_insensitive and
//     iis any change of letters' case, under iis a trailing space or dot,
//     under servlet path parameters (";x") and trailing white space.
func FuzzCanonical(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/login", "api.example.com"},
		{"post", "/%6Cogin", "API.example.com."},
		{"POST", "//submit", "x:80"},
		{"GET", "/foo/../login/", ""},
		{"GET", "/users/7%2F8", "[::1]:8080"},
		{"GET", "/files/a/./b", "api.example.com"},
		{"PUT", "/caf%c3%a9", "h"},
		{"GET", "/a%2fb", "h"},
		{"GET", "/a%2Fb/x%20y", "h"},
		{"HEAD", "/api", "api.example.com"},
		{"GET", "/%zz", "api.example.com.."},
		{"GET", "/login/%2F", ""},    // a last %2F: the trailing slash
		{"POST", "/users/1/%2f", ""}, // which ServeMux does not merge
		{"POST", "/LOGIN;jsessionid=1/x/..;y", "h"},
		{"GET", "/Login%20.%09/a%5Cb", "h"},
		{"GET", "/adm%C4%B1n/STRA%C3%9FE", "h"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	exact, routing := newMux(exactPatterns), newMux(routingPatterns)
	f.Fuzz(func(t *testing.T, method, target, host string) {
		c, err := request.New(method, target, host)
		if err != nil {
			if !errors.Is(err, request.ErrMalformed) {
				t.Fatalf("New(%q, %q, %q): %v does not wrap ErrMalformed", method, target, host, err)
			}
			return
		}
		checkFixedPoint(t, c, method, target, host)
		checkFolds(t, c.Path)
		checkRouting(t, exact, routing, c, method, target, host)
	})
}

// checkFixedPoint checks that c, the form of method, target and host, is
// a fixed point that every other spelling of it comes back to.
func checkFixedPoint(t *testing.T, c request.Canonical, method, target, host string) {
	t.Helper()
	same := func(what, m, p, h string) {
		t.Helper()
		got, err := request.New(m, p, h)
		if err != nil || got != c {
			t.Fatalf("%s: New(%q, %q, %q) = %+v, %v; want %+v (from %q %q %q)", what, m, p, h, got, err, c, method, target, host)
		}
	}
	same("again", c.Method, c.Path, c.Host)
	same("lower method", strings.ToLower(c.Method), c.Path, c.Host)
	same("doubled slash", c.Method, "/"+c.Path, c.Host)
	same("trailing slash", c.Method, c.Path+"/", c.Host)
	same("dot segment", c.Method, "/."+c.Path, c.Host)
	same("dot-dot segment", c.Method, "/x/%2e%2E"+c.Path, c.Host)
	same("escaped", c.Method, escapeAll(c.Path), c.Host)
	if d := request.DecodeSlashes(c.Path); request.DecodeSlashes(d) != d {
		t.Fatalf("DecodeSlashes(%q) = %q is not a fixed point", c.Path, d)
	} else if p, err := request.Path(d); err != nil || p != d {
		t.Fatalf("DecodeSlashes(%q) = %q is not canonical (%q, %v)", c.Path, d, p, err)
	}
	if c.Host != "" {
		h := strings.ToUpper(c.Host)
		if h[0] != '[' {
			h += "."
		}
		same("host spelling", c.Method, c.Path, h+":8080")
	}
}

// checkRouting checks that the form c of a request the standard server
// would hand a handler (method, target, host) routes as the request does:
// on exact's patterns, to a pattern c matches; on routing's, to the same
// pattern as the request.
func checkRouting(t *testing.T, exact, routing *http.ServeMux, c request.Canonical, method, target, host string) {
	t.Helper()
	// Only what the standard server would hand a handler.
	u, err := url.ParseRequestURI(target)
	if err != nil || u.EscapedPath() != target || u.RawQuery != "" || u.Fragment != "" || target == "" {
		return
	}
	r := &http.Request{Method: method, Host: host, URL: u}
	if _, pat := exact.Handler(r); pat != "" {
		pm, ph, pp := patternParts(pat)
		want, err := request.Path(pp)
		if err != nil {
			t.Fatal(err)
		}
		if c.Path != want || (ph != "" && c.Host != ph) || (pm != "" && c.Method != pm) {
			t.Fatalf("%q %q Host %q is routed to %q but its form is %+v", method, target, host, pat, c)
		}
	}
	lower := strings.ToLower(target)
	if strings.Contains(lower, "%2e") || (len(target) > 1 && strings.HasSuffix(target, "/")) || strings.HasSuffix(lower, "/%2f") ||
		method != c.Method || stripPort(host) != c.Host {
		return
	}
	_, pat := routing.Handler(r)
	cu := &url.URL{Path: unescape(t, c.Path), RawPath: c.Path}
	_, cpat := routing.Handler(&http.Request{Method: c.Method, Host: c.Host, URL: cu})
	if pat != cpat {
		t.Fatalf("%q %q Host %q is routed to %q, its form %+v to %q", method, target, host, pat, c, cpat)
	}
}

// checkFolds checks invariant 3 on the canonical path p.
func checkFolds(t *testing.T, p string) {
	t.Helper()
	for _, s := range []request.PathSemantics{request.PathStrict, request.PathCaseInsensitive, request.PathIIS, request.PathServlet} {
		f := s.Fold(p)
		if c, err := request.Path(f); err != nil || c != f {
			t.Fatalf("%v.Fold(%q) = %q is not canonical (%q, %v)", s, p, f, c, err)
		}
		if again := s.Fold(f); again != f {
			t.Fatalf("%v.Fold(%q) = %q, folded again %q: not idempotent", s, p, f, again)
		}
		if s == request.PathStrict && f != p {
			t.Fatalf("strict.Fold(%q) = %q; want it unchanged", p, f)
		}
		same := func(what, variant string) {
			t.Helper()
			v, err := request.Path(variant)
			if err != nil {
				t.Fatalf("%s of %q: Path(%q): %v", what, p, variant, err)
			}
			if g := s.Fold(v); g != f {
				t.Fatalf("%v: %s %q folds to %q, but %q to %q", s, what, variant, g, p, f)
			}
		}
		switch s {
		case request.PathCaseInsensitive, request.PathIIS:
			same("upper case", swapCase(p, true))
			same("lower case", swapCase(p, false))
			if s == request.PathIIS {
				same("trailing space and dot", p+"%20.")
			}
		case request.PathServlet:
			same("path parameter", p+";jsessionid=1")
			same("trailing white space", p+"%20%09")
		}
	}
}

// swapCase returns the escaped path p with its raw ASCII letters (not its
// escapes' hex digits) in upper case, or in lower case.
func swapCase(p string, upper bool) string {
	b := []byte(p)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '%':
			i += 2
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// escapeAll percent-encodes every byte of p but "/" in lower-case hex,
// a spelling of p as good as any other.
func escapeAll(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '/':
			b.WriteByte('/')
		case c == '%':
			b.WriteString(p[i : i+3])
			i += 2
		default:
			const hex = "0123456789abcdef"
			b.Write([]byte{'%', hex[c>>4], hex[c&15]})
		}
	}
	return b.String()
}

func unescape(t *testing.T, p string) string {
	s, err := url.PathUnescape(p)
	if err != nil {
		t.Fatalf("canonical path %q does not unescape: %v", p, err)
	}
	return s
}

// stripPort is what ServeMux does to a Host before matching.
func stripPort(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}
