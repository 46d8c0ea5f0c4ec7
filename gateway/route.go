package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/request"
	"github.com/sluicehq/sluice/rlheader"
)

// This file routes a request: by its canonical form (package request),
// computed once here and stored in the request's context for the keys
// (host, method) and the route's method check.

// routeRef is the handler a pattern index registers for a route's
// patterns: the route's index in Config.Routes (and state.routes). It is
// to be found, never called.
type routeRef int

// ServeHTTP answers 404; a routeRef is found by matching, never served.
func (routeRef) ServeHTTP(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }

// patternIndex is the routes' patterns registered on a ServeMux, each
// pattern to its route's index. ServeMux checks a new pattern against
// those before it for conflicts, which makes registering n patterns cost
// up to n squared comparisons: a Config's index is built once, by
// ParseFile (which reports a conflict with its line) or else by New, and
// every Gateway state of that Config shares it. Once built it is only
// read. The zero value is not usable: start with newPatternIndex.
type patternIndex struct {
	mux      *http.ServeMux
	patterns [][]string // each route's patterns, as registered
}

// newPatternIndex returns an empty index.
func newPatternIndex() *patternIndex { return &patternIndex{mux: http.NewServeMux()} }

// add registers pattern for the route at index i (at most one more than
// the last route added), or returns why it cannot, as register does.
func (x *patternIndex) add(i int, pattern string) error {
	if err := register(x.mux, pattern, routeRef(i)); err != nil {
		return err
	}
	for len(x.patterns) <= i {
		x.patterns = append(x.patterns, nil)
	}
	x.patterns[i] = append(x.patterns[i], pattern)
	return nil
}

// fits reports whether x was built from routes: the same patterns, in
// the same order, route by route. A nil index fits nothing.
func (x *patternIndex) fits(routes []Route) bool {
	if x == nil || len(x.patterns) != len(routes) {
		return false
	}
	for i := range routes {
		if !slices.Equal(x.patterns[i], routes[i].Patterns) {
			return false
		}
	}
	return true
}

// register registers h for pattern on mux, or returns why it cannot (bad
// syntax, a host or path no request's canonical form could have, or a
// conflict with a pattern registered before), without the panic of
// ServeMux.Handle.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	p, err := canonicalPattern(pattern)
	if err != nil {
		return fmt.Errorf("pattern %q: %w", pattern, err)
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("pattern %q: %v", pattern, v)
		}
	}()
	mux.Handle(p, h)
	return nil
}

// canonicalPattern returns pattern as the canonical forms of requests
// are matched against it: its method in upper case, its host in canonical
// form. It refuses a host with a port (hosts match without one), an
// empty, "." or ".." path segment and a last segment "%2F" (before "{$}"
// or not), which no request's canonical path has.
func canonicalPattern(pattern string) (string, error) {
	method, rest := "", pattern
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		rest = strings.TrimLeft(pattern[i:], " \t")
		m, err := request.Method(pattern[:i])
		if err != nil {
			return "", errors.New("bad method")
		}
		method = m + " "
	}
	j := strings.IndexByte(rest, '/')
	if j < 0 {
		return pattern, nil // ServeMux says what is wrong
	}
	host, path := rest[:j], rest[j:]
	if host != "" {
		h, err := request.Host(host)
		if err != nil {
			return "", fmt.Errorf("host %q: %w", host, err)
		}
		if strings.Contains(host[strings.IndexByte(host, ']')+1:], ":") {
			return "", fmt.Errorf("host %q has a port: hosts match without their port, as NGINX's $host", host)
		}
		host = h
	}
	segs := strings.Split(path[1:], "/")
	last := len(segs) - 1 // the segment a request's path ends in
	if last > 0 && segs[last] == "{$}" {
		last-- // "/a/{$}" matches the path "/a", as "/a/" does
	}
	for i, seg := range segs {
		if seg == "" && i == len(segs)-1 {
			continue // the root, or a subtree's trailing slash
		}
		d, err := url.PathUnescape(seg)
		if err != nil || d == "" || d == "." || d == ".." {
			return "", fmt.Errorf("path segment %q never matches: requests are matched without empty, \".\" and \"..\" segments", seg)
		}
		if d == "/" && i == last {
			return "", fmt.Errorf("path segment %q never matches: a request's last %%2F is its trailing slash, and requests are matched without one", seg)
		}
	}
	return method + host + path, nil
}

// match finds r's route by r's canonical form, and returns r with the
// form in its context. A malformed request (method, path or host) is
// answered 400 with a problem, and match returns a nil route.
//
// Matching never redirects: "/a" belongs to the subtree "/a/" when no
// pattern has "/a" itself, and since the canonical path has no trailing
// slash, "/login/" is "/login". As NGINX matches locations, an encoded
// slash is read first as a slash ("/admin%2Fx" is under "/admin/"); a
// request that matches no route so is matched again with %2F inside its
// segment ("/users/a%2Fb" as one {id}), as ServeMux reads it, so that it is
// unlimited only when neither reading matches a route, and limited by both
// routes when the readings match two.
func (st *state) match(w http.ResponseWriter, r *http.Request) (*route, *http.Request) {
	c, err := request.FromRequest(r)
	if err != nil {
		st.malformed(w, r, err)
		return nil, r
	}
	if len(st.cfg.Routes) == 0 {
		return st.fallback, r // no limit: nothing keys on the form
	}
	if sw, ok := w.(*sendWriter); ok {
		r = r.WithContext(request.NewContextValue(r.Context(), c, writerKey{}, sw)) // for boundedWait
		sw.req = r
	} else {
		r = r.WithContext(request.NewContext(r.Context(), c))
	}
	if len(st.folded) > 0 {
		return st.matchFolded(r, c)
	}
	var (
		rt      *route
		pattern string
	)
	if d := request.DecodeSlashes(c.Path); d != c.Path {
		rt, pattern = st.find(st.mux, r, c, d)
		if other, otherPattern := st.find(st.mux, r, c, c.Path); other != nil && other != rt {
			if rt != nil {
				r.Pattern = otherPattern
				return both(other, rt, pattern), r
			}
			rt, pattern = other, otherPattern
		}
	} else {
		rt, pattern = st.find(st.mux, r, c, c.Path)
	}
	if rt == nil {
		return st.fallback, r
	}
	r.Pattern = pattern // for httplimit.Route keys
	return rt, r
}

// foldedMux is the patterns of the routes whose upstream reads paths
// with sem (not PathStrict), matched against paths folded by sem.
type foldedMux struct {
	sem request.PathSemantics
	mux *http.ServeMux
}

// candidate is a route a reading of a request matches, with its pattern.
type candidate struct {
	rt      *route
	pattern string
}

// matchFolded is match for a state with routes whose upstream folds
// paths (Upstream.PathSemantics). The request goes where match sends it
// without folding: to the route its readings (an encoded slash read as a
// slash, then as ServeMux reads it) match as written, first the one of
// the first reading; only when none does, to the first route that a
// reading folded by a non-strict semantics matches ("/LOGIN" is "/login"
// to a case_insensitive route). Then, when that route's upstream folds
// paths, the routes of its semantics that its folded readings match
// apply their limits first, as both applies them: the upstream serves
// the request as the resource its folded path names, so that resource's
// limits apply ("/login;x" routed to a servlet catch-all "/{page}" spends
// "/login"'s allowance too).
func (st *state) matchFolded(r *http.Request, c request.Canonical) (*route, *http.Request) {
	var (
		buf   [6]candidate
		cands = buf[:0]
	)
	add := func(rt *route, pattern string) {
		if rt == nil {
			return
		}
		for _, x := range cands {
			if x.rt == rt {
				return
			}
		}
		cands = append(cands, candidate{rt, pattern})
	}
	readings := [2]string{request.DecodeSlashes(c.Path), c.Path}
	n := 2
	if readings[0] == readings[1] {
		n = 1
	}
	for _, p := range readings[:n] {
		add(st.find(st.mux, r, c, p))
	}
	for i := 0; i < len(st.folded) && len(cands) == 0; i++ {
		for _, p := range readings[:n] {
			if rt, pattern := st.find(st.folded[i].mux, r, c, st.folded[i].sem.Fold(p)); rt != nil {
				add(rt, pattern)
				break
			}
		}
	}
	if len(cands) == 0 {
		return st.fallback, r
	}
	if sem := cands[0].rt.sem; sem != request.PathStrict {
		for _, f := range st.folded {
			if f.sem == sem {
				for _, p := range readings[:n] {
					add(st.find(f.mux, r, c, sem.Fold(p)))
				}
			}
		}
	}
	rt, pattern := cands[0].rt, cands[0].pattern
	for _, x := range cands[1:] {
		rt, pattern = both(x.rt, rt, pattern), x.pattern
	}
	r.Pattern = pattern
	return rt, r
}

// checkFoldedPattern returns why pattern can never match under sem: a
// literal path segment that sem folds to another ("/Login" under
// case_insensitive, which matches "/login" folded), as no folded path
// has it. Wildcards match folded segments as they are.
func checkFoldedPattern(pattern string, sem request.PathSemantics) error {
	if sem == request.PathStrict {
		return nil
	}
	rest := pattern
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		rest = strings.TrimLeft(pattern[i:], " \t")
	}
	j := strings.IndexByte(rest, '/')
	if j < 0 {
		return nil // register says what is wrong
	}
	segs := strings.Split(rest[j+1:], "/")
	first := ""
	for i, seg := range segs {
		if seg == "" || strings.HasPrefix(seg, "{") {
			continue
		}
		p, err := request.Path("/" + seg)
		if err != nil {
			return nil // register says what is wrong
		}
		if f := sem.Fold(p); f != p {
			if first == "" {
				first = seg
			}
			segs[i] = strings.TrimPrefix(f, "/")
		}
	}
	if first == "" {
		return nil
	}
	want := pattern[:len(pattern)-len(rest)] + rest[:j+1] + strings.Join(segs, "/")
	return fmt.Errorf("pattern %q never matches: its upstream reads paths as %s, to which %q is not a path segment; write %q", pattern, sem, first, want)
}

// both returns a route that applies the method check and limits of first
// (whose pattern the request already carries), then those of second, and
// forwards as second does: the route of a request whose two readings of
// an encoded slash match two routes, so that the upstream reaches neither
// route's handler past its limit, whichever reading it takes.
func both(first, second *route, secondPattern string) *route {
	then := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Pattern = secondPattern
		second.handler.ServeHTTP(w, r)
	})
	return &route{name: second.name, handler: first.wrap(then), wrap: nil}
}

// find returns the route of the canonical request c with the canonical
// path p on mux (st.mux, or a folded one), or nil: p's own route, else
// the subtree p+"/".
func (st *state) find(mux *http.ServeMux, r *http.Request, c request.Canonical, p string) (*route, string) {
	look := r // already canonical, as most requests are: no copy to match
	if r.Method != c.Method || !sameHost(r.Host, c.Host) || r.URL.RawPath != "" || r.URL.Path != p {
		look = withCanonical(r, c, p)
	}
	h, pattern := mux.Handler(look)
	if i, ok := h.(routeRef); ok {
		return st.routes[i], pattern
	}
	if p == "/" {
		return nil, ""
	}
	h, pattern = mux.Handler(withCanonical(r, c, p+"/"))
	if i, ok := h.(routeRef); ok {
		return st.routes[i], pattern
	}
	return nil, ""
}

// sameHost reports whether ServeMux sees the Host header h as the
// canonical host c: the same, or the same with a port.
func sameHost(h, c string) bool {
	return h == c || len(h) > len(c) && h[len(c)] == ':' && h[:len(c)] == c && (c == "" || c[0] != '[')
}

// withCanonical returns a shallow copy of r with c's method and host and
// the canonical path p, for ServeMux to match.
func withCanonical(r *http.Request, c request.Canonical, p string) *http.Request {
	u := &url.URL{Path: p}
	if strings.IndexByte(p, '%') >= 0 {
		u.Path, _ = url.PathUnescape(p) // p is canonical: its escapes are valid
		u.RawPath = p
	}
	l := *r
	l.Method, l.Host, l.URL = c.Method, c.Host, u
	return &l
}

// malformed answers 400 to a request that has no canonical form.
func (st *state) malformed(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Cache-Control", "no-store")
	n := writeProblem(w, rlheader.Problem{
		Title: "Bad Request", Status: http.StatusBadRequest, Detail: err.Error(),
	}, http.StatusBadRequest)
	st.access(r, http.StatusBadRequest, n, "MALFORMED", nil)
	st.cfg.Metrics.outcome(Unmatched, "malformed")
}
