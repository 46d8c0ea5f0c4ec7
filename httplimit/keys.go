package httplimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/request"
)

// KeyFunc says whose allowance a request spends. ok is false when the
// request carries no such key (no API key header, no user in the context);
// the policy's OnMissingKey then decides. The Middleware scopes every key to
// its policy, so two policies never share an allowance.
type KeyFunc func(r *http.Request) (key string, ok bool)

// ClientIP keys by the client's address as res finds it: the peer, or the
// rightmost untrusted address of a trusted proxy's forwarding header, IPv6
// grouped by prefix. A nil res trusts no proxy.
func ClientIP(res *clientip.Resolver) KeyFunc {
	if res == nil {
		res = &clientip.Resolver{}
	}
	return func(r *http.Request) (string, bool) {
		k, err := res.Key(r)
		return k, err == nil && k != ""
	}
}

// Host keys by the request's host in canonical form (package request):
// lower case, without port or trailing dot, as NGINX's $host, so that no
// spelling of a host is a fresh allowance. The key is missing for a
// request without a host or with a malformed one.
func Host() KeyFunc {
	return func(r *http.Request) (string, bool) {
		c, err := request.Of(r)
		return c.Host, err == nil && c.Host != ""
	}
}

// Method keys by the request's method in canonical form (package
// request): upper case, so that "post" spends POST's allowance. The key is
// missing for a malformed request.
func Method() KeyFunc {
	return func(r *http.Request) (string, bool) {
		c, err := request.Of(r)
		return c.Method, err == nil
	}
}

// Header keys by the value of a request header, such as an API key. The
// value is used as is, trimmed of white space; set Config.HashKeys to keep
// secrets out of the store.
//
// The handler behind the limit then sees the header as it was keyed,
// whatever the client sent: of several lines of the header only the first
// (the key) is kept, and a header whose name is the same but for "_" in
// place of "-" (X_API_Key for X-API-Key) is removed, as NGINX drops headers
// with underscores. Otherwise an application that reads the last line, or
// that reads names as CGI and WSGI do (HTTP_X_API_KEY for both spellings),
// would act on a value the limit never counted, and a client could rotate
// the counted one to spend no allowance at all.
func Header(name string) KeyFunc {
	canon := http.CanonicalHeaderKey(name)
	underscore := strings.IndexByte(canon, '_') >= 0
	return func(r *http.Request) (string, bool) {
		vs := r.Header[canon]
		if len(vs) > 1 {
			r.Header[canon] = vs[:1:1]
		}
		for k := range r.Header {
			if k != canon && (underscore || strings.IndexByte(k, '_') >= 0) && SameHeaderToCGI(k, canon) {
				delete(r.Header, k)
			}
		}
		if len(vs) == 0 {
			return "", false
		}
		v := strings.TrimSpace(vs[0])
		return v, v != ""
	}
}

// SameHeaderToCGI reports whether the header names a and b are the same
// in any case with "_" read as "-", as CGI and WSGI servers read them
// (X_Forwarded_For and X-Forwarded-For are both HTTP_X_FORWARDED_FOR). It
// does not allocate.
func SameHeaderToCGI(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if x != y && lower(x) != lower(y) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// ContextValue keys by a value the request's context holds under key, such
// as a user or tenant ID put there by authentication middleware. The value
// must be a non-empty string or a fmt.Stringer.
func ContextValue(key any) KeyFunc {
	return func(r *http.Request) (string, bool) {
		switch v := r.Context().Value(key).(type) {
		case string:
			return v, v != ""
		case fmt.Stringer:
			s := v.String()
			return s, s != ""
		}
		return "", false
	}
}

// Route keys by the route pattern that matched the request (Go 1.22's
// http.Request.Pattern, such as "GET /items/{id}"), so that a limit applies
// per route rather than per URL. The pattern is known only to handlers the
// ServeMux routes to, so wrap those (mux.Handle(pattern, m.Handler(h))).
// With other routers, use RouteFunc.
func Route() KeyFunc {
	return func(r *http.Request) (string, bool) { return r.Pattern, r.Pattern != "" }
}

// RouteFunc keys by the route pattern a router reports, for routers other
// than http.ServeMux (for chi: chi.RouteContext(r.Context()).RoutePattern()).
func RouteFunc(pattern func(*http.Request) string) KeyFunc {
	return func(r *http.Request) (string, bool) {
		p := pattern(r)
		return p, p != ""
	}
}

// Global keys every request alike: one allowance for all of them.
func Global() KeyFunc {
	return func(*http.Request) (string, bool) { return "*", true }
}

// Composite keys by all of fs together, such as tenant and route; the key
// is missing if any part is. Each part is written after its length, so no
// two different lists of parts make the same key, whatever they contain.
func Composite(fs ...KeyFunc) KeyFunc {
	return func(r *http.Request) (string, bool) {
		var b strings.Builder
		for _, f := range fs {
			k, ok := f(r)
			if !ok {
				return "", false
			}
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
		}
		return b.String(), b.Len() > 0
	}
}
