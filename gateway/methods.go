package gateway

import (
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/request"
	"github.com/sluicehq/sluice/rlheader"
)

// onlyMethods returns h behind rt.Methods: a request with another method
// is answered 403, as NGINX's limit_except METHODS { deny all; } answers
// it, before any limit is charged. GET allows HEAD, as in NGINX.
func (st *state) onlyMethods(rt Route, h http.Handler) http.Handler {
	allowed := slices.Clone(rt.Methods)
	if slices.Contains(allowed, http.MethodGet) && !slices.Contains(allowed, http.MethodHead) {
		allowed = append(allowed, http.MethodHead)
	}
	allow := strings.Join(allowed, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := request.Of(r); err == nil && slices.Contains(allowed, c.Method) { // "post" is POST
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Allow", allow)
		n := writeProblem(w, rlheader.Problem{
			Title: "Forbidden", Status: http.StatusForbidden,
			Detail: "this route accepts only " + allow,
		}, http.StatusForbidden)
		st.access(r, http.StatusForbidden, n, "DENIED", []string{rt.Name})
		st.cfg.Metrics.outcome(rt.Name, "denied")
	})
}
