package service

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/request"
	"github.com/sluicehq/sluice/rlheader"
)

// ForwardAuthPath is the path of the forward-auth endpoint on Handler.
const ForwardAuthPath = "/auth"

// forwardAuth is a validated forward_auth section with its Resolver.
type forwardAuth struct {
	domain   string
	resolver *clientip.Resolver
	descs    [][]config.AuthEntry
	canon    bool                  // some entry reads the method, URI, path or host
	paths    request.PathSemantics // fa.PathSemantics: how the application reads a path
}

// newForwardAuth validates fa, the forward_auth section of a config, as the
// endpoint reads it; res finds the client's address for client_ip entries
// (nil: a Resolver that trusts fa.TrustedProxies). The auth request's peer
// is the proxy, so a client_ip entry needs a Resolver that trusts it.
// newForwardAuth is the package's newForwardAuth within the Service's
// request caps: a section whose requests would have more descriptors, or
// longer ones, than the Service accepts (Config.MaxDescriptors,
// MaxEntries) is an error, not a handler that answers every request 400.
func (s *Service) newForwardAuth(fa *config.ForwardAuth, res *clientip.Resolver) (*forwardAuth, error) {
	if n := len(fa.Descriptors); n > s.maxDescs {
		return nil, fmt.Errorf("service: forward_auth builds %d descriptors, over the maximum of %d a request may carry (-max-descriptors)", n, s.maxDescs)
	}
	for i, d := range fa.Descriptors {
		if n := len(d.Entries); n > s.maxEnts {
			return nil, fmt.Errorf("service: forward_auth descriptor %d has %d entries, over the maximum of %d (-max-entries)", i, n, s.maxEnts)
		}
	}
	return newForwardAuth(fa, res)
}

func newForwardAuth(fa *config.ForwardAuth, res *clientip.Resolver) (*forwardAuth, error) {
	if fa.Domain == "" {
		return nil, errors.New("service: forward_auth has no domain")
	}
	if len(fa.Descriptors) == 0 {
		return nil, errors.New("service: forward_auth has no descriptors")
	}
	if res == nil {
		res = &clientip.Resolver{TrustedProxies: fa.TrustedProxies}
	}
	needIP := false
	a := &forwardAuth{domain: fa.Domain, resolver: res, descs: make([][]config.AuthEntry, len(fa.Descriptors)), paths: fa.PathSemantics}
	for i, d := range fa.Descriptors {
		if len(d.Entries) == 0 {
			return nil, fmt.Errorf("service: forward_auth descriptor %d has no entries", i)
		}
		for j, e := range d.Entries {
			where := fmt.Sprintf("service: forward_auth descriptor %d entry %d", i, j)
			switch {
			case e.Key == "":
				return nil, errors.New(where + " has an empty key")
			case e.From > config.FromHost:
				return nil, fmt.Errorf("%s: unknown source %v", where, e.From)
			case e.From == config.FromHeader && e.Header == "":
				return nil, errors.New(where + ": a header source names no header")
			case e.From == config.FromLiteral && e.Value == "":
				return nil, errors.New(where + ": a literal source has an empty value")
			case e.From == config.FromClientIP:
				needIP = true
			case e.From == config.FromMethod || e.From == config.FromURI || e.From == config.FromPath || e.From == config.FromHost:
				a.canon = true
			}
		}
		a.descs[i] = slices.Clone(d.Entries)
	}
	if needIP {
		if len(res.TrustedProxies) == 0 {
			return nil, errors.New("service: forward_auth: a client_ip entry needs a Resolver that trusts the proxy " +
				"(every request would otherwise have the proxy's address)")
		}
		if err := res.Validate(); err != nil {
			return nil, fmt.Errorf("service: forward_auth: %w", err)
		}
	}
	return a, nil
}

// forwarded is what a forward-auth request says of the request it asks
// about, in canonical form (package request), computed once.
type forwarded struct {
	canon request.Canonical
	uri   bool   // the proxy sent a URI
	query string // the URI's query, with its "?", as sent
}

// forwardedOf reads the forwarded request's method, URI and host from the
// headers the proxies send, the path folded by sem; see value. The
// error wraps request.ErrMalformed: a request with no canonical form, or
// whose headers for one of the three disagree (X-Forwarded-Uri and
// X-Original-URI, two X-Forwarded-Host lines: see agreedHeader).
func forwardedOf(r *http.Request, sem request.PathSemantics) (forwarded, error) {
	var f forwarded
	method, err := agreedHeader(r, strings.EqualFold, "X-Forwarded-Method", "X-Original-Method")
	if err != nil {
		return f, err
	}
	if method == "" {
		method = r.Method
	}
	uri, err := agreedHeader(r, nil, "X-Forwarded-Uri", "X-Original-URI")
	if err != nil {
		return f, err
	}
	host, err := agreedHeader(r, nil, "X-Forwarded-Host")
	if err != nil {
		return f, err
	}
	f.uri = uri != ""
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		if uri[i] == '?' {
			f.query = uri[i:]
			if j := strings.IndexByte(f.query, '#'); j >= 0 {
				f.query = f.query[:j]
			}
		}
		uri = uri[:i]
	}
	if i := strings.Index(uri, "://"); i > 0 && !strings.HasPrefix(uri, "/") {
		// The absolute form ("http://host/path"), as NGINX's
		// $request_uri holds it when the client sent one.
		rest := uri[i+3:]
		uri = "/"
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			uri = rest[j:]
		}
	}
	f.canon, err = request.New(method, uri, host)
	// An encoded slash read as a slash, as the proxy reads it first:
	// "/login%2F" is "/login" to an application that decodes the whole
	// path, so it must be to the limit. Then folded as the application
	// reads it (forward_auth's path_semantics), as `sluice proxy` folds a
	// route's path: "/LOGIN" is "/login" to a case-insensitive one.
	f.canon.Path = sem.Fold(request.DecodeSlashes(f.canon.Path))
	return f, err
}

// value returns the value of e for r, false when the request has none:
//   - client_ip: the client's address, found by the Resolver in the trusted
//     X-Forwarded-For (or Forwarded) header the proxy sets, as
//     clientip.Resolver.Key writes it (IPv6 grouped by prefix);
//   - method: X-Forwarded-Method (Traefik, Caddy), else X-Original-Method,
//     else the method of the auth request itself (NGINX's auth_request
//     subrequest keeps it), in canonical form (upper case);
//   - uri: X-Forwarded-Uri (Traefik, Caddy), else X-Original-URI (NGINX's
//     usual `proxy_set_header X-Original-URI $request_uri`): its canonical
//     path ("//login/", "/%6Cogin" and "/a/../login" are "/login"), with
//     "%2F" read as a slash (request.DecodeSlashes) and folded by the
//     section's path_semantics (request.PathSemantics.Fold), then the
//     query as sent;
//   - path: uri's canonical path, without the query;
//   - header: the first value of the named request header;
//   - literal: the entry's value, like Envoy's generic_key;
//   - host: X-Forwarded-Host (Traefik and Caddy send it; NGINX:
//     proxy_set_header X-Forwarded-Host $host) in canonical form: lower
//     case, without port or trailing dot.
func (a *forwardAuth) value(e *config.AuthEntry, r *http.Request, f *forwarded) (string, bool) {
	var v string
	switch e.From {
	case config.FromClientIP:
		if k, err := a.resolver.Key(r); err == nil {
			v = k
		}
	case config.FromMethod:
		v = f.canon.Method
	case config.FromPath:
		if f.uri {
			v = f.canon.Path
		}
	case config.FromURI:
		if f.uri {
			v = f.canon.Path + f.query
		}
	case config.FromHeader:
		v = r.Header.Get(e.Header)
	case config.FromLiteral:
		v = e.Value
	case config.FromHost:
		v = f.canon.Host
	}
	return v, v != ""
}

// agreedHeader returns the value that every non-empty line of the headers
// names carries, "" when there is none. Lines that disagree (same, when
// non-nil, compares two values; else they must be equal) are an error
// wrapping request.ErrMalformed: a proxy sets one of the names, and passes
// on the client's own lines of the others (NGINX's auth_request passes
// every header it does not set), so a disagreement is a client choosing
// what the limit sees.
func agreedHeader(r *http.Request, same func(a, b string) bool, names ...string) (string, error) {
	var v, from string
	for _, n := range names {
		for _, line := range r.Header.Values(n) {
			switch {
			case line == "":
			case v == "":
				v, from = line, n
			case line != v && (same == nil || !same(line, v)):
				return "", fmt.Errorf("%w: %s %q and %s %q disagree", request.ErrMalformed, from, v, n, line)
			}
		}
	}
	return v, nil
}

// request builds the RateLimitRequest of r. A descriptor with an entry
// whose value is missing is left out, as Envoy leaves out a descriptor
// whose action finds nothing. The error, for a forwarded request with no
// canonical form, wraps request.ErrMalformed.
func (a *forwardAuth) request(r *http.Request) (*pb.RateLimitRequest, error) {
	var f forwarded
	if a.canon {
		var err error
		if f, err = forwardedOf(r, a.paths); err != nil {
			return nil, err
		}
	}
	req := &pb.RateLimitRequest{Domain: a.domain}
next:
	for _, d := range a.descs {
		rd := &rlpb.RateLimitDescriptor{Entries: make([]*rlpb.RateLimitDescriptor_Entry, len(d))}
		for j := range d {
			v, ok := a.value(&d[j], r, &f)
			if !ok {
				continue next
			}
			rd.Entries[j] = &rlpb.RateLimitDescriptor_Entry{Key: d[j].Key, Value: v}
		}
		req.Descriptors = append(req.Descriptors, rd)
	}
	return req, nil
}

// ForwardAuthHandler returns the forward-auth endpoint of s for fa, a
// config's forward_auth section, with res finding the client's address for
// its client_ip entries (nil: a Resolver that trusts fa.TrustedProxies),
// validated as New validates Config.ForwardAuth and Config.AuthResolver: a
// handler that answers as Handler's /auth does (see the package
// documentation), at whatever path it is mounted, under the Service's
// rules, store and header mode of the moment. It is for servers that change
// the section while they serve, as on a config reload: build a handler for
// the new section and swap it in. Config.ForwardAuth is simpler when the
// section is fixed. fa's descriptors are copied; res must not change
// afterwards. The handler is safe for concurrent use.
func (s *Service) ForwardAuthHandler(fa *config.ForwardAuth, res *clientip.Resolver) (http.Handler, error) {
	if fa == nil {
		return nil, errors.New("service: ForwardAuthHandler: nil forward_auth section")
	}
	a, err := s.newForwardAuth(fa, res)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveAuthWith(a, w, r) }), nil
}

// serveAuth is the forward-auth endpoint of Config.ForwardAuth; see
// Handler.
func (s *Service) serveAuth(w http.ResponseWriter, r *http.Request) { s.serveAuthWith(s.auth, w, r) }

// serveAuthWith answers a forward-auth request under the mapping a.
func (s *Service) serveAuthWith(a *forwardAuth, w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	req, err := a.request(r)
	if err != nil {
		// As the proxy answers a request with no canonical form.
		writeAuthProblem(w, rlheader.Problem{Title: "Bad Request", Status: http.StatusBadRequest, Detail: err.Error()})
		return
	}
	if len(req.Descriptors) == 0 {
		w.WriteHeader(http.StatusOK) // nothing to limit, as Envoy does not ask
		return
	}
	resp, outs, err := s.evaluate(r.Context(), req)
	if err != nil {
		code := httpStatus(status.Code(err))
		if code == http.StatusServiceUnavailable {
			h.Set(rlheader.HeaderRetryAfter, "1")
		}
		http.Error(w, status.Convert(err).Message(), code)
		return
	}
	over := resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT
	names, pols := s.setAuthHeaders(h, outs, over)
	if !over {
		w.WriteHeader(http.StatusOK)
		return
	}
	var violated []string
	for i := range outs {
		if o := &outs[i]; o.over && !o.p.shadow && !slices.Contains(violated, o.p.policy) {
			violated = append(violated, o.p.policy)
		}
	}
	s.renameViolated(violated, names, pols)
	h.Set(rlheader.HeaderReason, strings.Join(violated, ", "))
	writeAuthProblem(w, rlheader.QuotaExceeded(http.StatusTooManyRequests, violated...))
}

// writeAuthProblem answers with p, whose Status is the response's.
func writeAuthProblem(w http.ResponseWriter, p rlheader.Problem) {
	body, _ := p.MarshalJSON()
	h := w.Header()
	h.Set("Content-Type", rlheader.ProblemContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	w.Write(body)
}

// setAuthHeaders writes the header contract of package httplimit:
// RateLimit-Policy for every enforced rule of the request, RateLimit for
// the one pick chooses, Retry-After when over the limit, and the legacy
// trio when Config.Headers is HeadersLegacy. The policies are named as
// Config.PolicyNames asks; unless it is PolicyNamesRule, names returns
// the policies' names before, pols the policies as renamed, for
// renameViolated.
func (s *Service) setAuthHeaders(h http.Header, outs []outcome, over bool) (names []string, pols []rlheader.Policy) {
	o := pick(outs)
	if o == nil {
		return nil, nil // no enforced rule: no header, never an empty one
	}
	for i := range outs {
		q := &outs[i]
		if q.eligible && !slices.ContainsFunc(pols, func(p rlheader.Policy) bool { return p.Name == q.p.policy }) {
			pols = append(pols, q.p.headerPolicy())
		}
	}
	status := o.p.policy
	if s.names != PolicyNamesRule {
		names = make([]string, len(pols))
		for i := range pols {
			names[i] = pols[i].Name
		}
		status = s.renamePolicies(pols, status)
	}
	remain := o.remaining()
	h.Set(rlheader.HeaderRateLimitPolicy, string(rlheader.AppendPolicies(nil, pols...)))
	h.Set(rlheader.HeaderRateLimit, string(rlheader.AppendStatuses(nil, rlheader.Status{Name: status, Remaining: remain, Reset: o.wait})))
	if s.headers == HeadersLegacy {
		h.Set(s.legacy.Limit, strconv.FormatUint(uint64(o.p.rpu), 10))
		h.Set(s.legacy.Remaining, strconv.FormatInt(remain, 10))
		h.Set(s.legacy.Reset, rlheader.FormatRetryAfter(o.wait))
	}
	if over && o.over {
		h.Set(rlheader.HeaderRetryAfter, rlheader.FormatRetryAfter(o.wait))
	}
	return names, pols
}
