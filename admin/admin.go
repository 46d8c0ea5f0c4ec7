// Package admin is Sluice's admin API over HTTP: read a key's state without
// spending (peek), reset a key, define a plan, put a tenant on a plan, set
// or clear a tenant's override (with an optional expiry), list a key's
// usage by period and export the usage ledger as CSV or JSON. Its routes
// are described in docs/admin-openapi.yaml, which a test checks against
// them.
//
// Every call is authenticated, by a bearer token (compared in constant
// time) or by a client certificate that the TLS listener verified (mTLS),
// and audited: one log line per call with who made it, the operation, its
// target and its result, refusals included, each client-supplied field cut
// to MaxLogField bytes. Calls refused for their credentials, which anyone
// can send, are audited at a bounded rate per peer, and the count of those
// not written follows in a summary line. A call without credentials is
// answered 401, a wrong token 403, a call a browser sent from another
// site 403, a body not sent as application/json 415, a malformed body 400
// with a message, a body over the limit 413; an operation whose backing
// part is not configured (no PostgreSQL, say) 501.
//
// The API is served on its own listener, off by default (see `sluice
// serve -admin-addr`). Other pages can mount on the same handler with
// Handle, behind the same authentication and audit log.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// UsageSource is the usage ledger the API reads (pgstore's Store, through
// an adapter of cmd/sluice).
type UsageSource interface {
	// Usage returns key's newest periods, oldest first, a bounded number.
	Usage(ctx context.Context, key string) ([]Period, error)
	// Ledger calls each for every period that starts in [from, to), in
	// order of start, streaming; an error of each stops it.
	Ledger(ctx context.Context, from, to time.Time, each func(Entry) error) error
}

// Period is a key's count in one period of the ledger.
type Period struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Count   int64     `json:"count"`
	Quota   int64     `json:"quota"`
	Updated time.Time `json:"updated"`
}

// Entry is one row of the ledger export.
type Entry struct {
	Key string `json:"key"`
	Period
}

// PlanWriter changes plans, tenants' plans and overrides. Limits are JSON
// objects that package plans has checked. A missing plan or override is
// an error wrapping ErrNotFound.
type PlanWriter interface {
	SetPlan(ctx context.Context, name string, limits []byte) error
	AssignPlan(ctx context.Context, tenant, plan string) error
	SetOverride(ctx context.Context, tenant, name string, limit []byte, expires time.Time) error
	ClearOverride(ctx context.Context, tenant, name string) error
}

// ErrNotFound is what a PlanWriter's error wraps for a plan or override
// that does not exist; the API answers it 404.
var ErrNotFound = errors.New("admin: not found")

// Config configures an API. Its zero value serves nothing but refusals:
// no credentials are accepted without Token or ClientCerts.
type Config struct {
	// Limiter is the store whose keys peek and reset read: peek needs a
	// sluice.Peeker, reset a Peeker and a sluice.Refunder. Nil: 501.
	Limiter sluice.Limiter
	// Keys maps a descriptor to the keys the running config counts it
	// under, for the descriptor calls (POST /v1/descriptors/peek and
	// reset), which read and reset those keys through Limiter. Nil: 501.
	Keys KeyResolver
	// KeyHash is the keyed hash the live page (and the proxy's logs) show
	// of a store key: the descriptor calls answer it, so that an operator
	// can tell which client is behind a hash. Nil: not answered.
	KeyHash func(key string) string
	// SessionPaths turns browser sign-in on (see LoginPath, LoginLink):
	// a session cookie then authenticates requests of this path and
	// under it (the live page's, page.Path) and no other. Empty: off,
	// LoginPath is not served and a cookie authenticates nothing.
	SessionPaths string
	// Usage serves usage and the ledger export. Nil: 501.
	Usage UsageSource
	// Plans serves the plan and override operations. Nil: 501.
	Plans PlanWriter
	// Changed is called after a change of tenant's plan or overrides
	// ("" after a plan's limits change: every tenant), so that this
	// process's cache (plans.Cache.Invalidate) sees it at once. Nil: none.
	Changed func(tenant string)
	// Token is the bearer token a caller must send; empty: no token is
	// accepted.
	Token []byte
	// ClientCerts accepts a caller whose TLS client certificate the
	// listener verified (its tls.Config must require and verify client
	// certificates). false: a certificate alone authenticates nobody.
	ClientCerts bool
	// Logger receives the audit log, one line per call. Nil: slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Timeout bounds one call's work, the ledger export's excepted. 0
	// means DefaultTimeout.
	Timeout time.Duration
	// ExportTimeout bounds one ledger export. 0 means DefaultExportTimeout.
	ExportTimeout time.Duration
	// ValidateLimit is the check of a limit by the store it will run on
	// (pgstore.ValidateLimit for PostgreSQL, which serves fixed windows
	// only): a plan or override it refuses is answered 400 when written,
	// not stored to fail every request of its tenants. Nil: the
	// Limiter's own check when it is a sluice.LimitValidator, else none.
	ValidateLimit func(sluice.Limit) error
	// Clock tells the time an override's expiry is checked against (an
	// expiry in the past is refused). Nil: sluice.SystemClock.
	Clock sluice.Clock
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes  = 64 << 10
	DefaultTimeout       = 10 * time.Second
	DefaultExportTimeout = 10 * time.Minute
)

// API is the admin API's handler. It is safe for concurrent use; make one
// with New.
type API struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	token    [32]byte // SHA-256 of Config.Token
	hasToken bool
	routes   []string
	sameSite *http.CrossOriginProtection
	gate     auditGate // of the audit lines of refused credentials
	sess     sessions  // login links and sessions (session.go)
}

// New returns the API for cfg.
//
// A browser holds the operator's credentials (a client certificate, or a
// token a page of the listener's own origin uses), so a page of another
// site could make it call the API: every call other than GET, HEAD and
// OPTIONS that a browser says comes from another origin (Sec-Fetch-Site,
// else Origin against Host: net/http's CrossOriginProtection) is refused
// 403, and a call with a body must send it as Content-Type:
// application/json (else 415), which a cross-site form cannot.
func New(cfg Config) *API {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ExportTimeout <= 0 {
		cfg.ExportTimeout = DefaultExportTimeout
	}
	cfg.Clock = sluice.ClockOr(cfg.Clock)
	a := &API{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), sameSite: http.NewCrossOriginProtection(),
		sess: sessions{links: map[[32]byte]time.Time{}, live: map[[32]byte]time.Time{}, ended: map[[32]byte]time.Time{}}}
	if a.log == nil {
		a.log = slog.Default()
	}
	if len(cfg.Token) > 0 {
		a.token, a.hasToken = sha256.Sum256(cfg.Token), true
	}
	a.route("POST /v1/keys/peek", a.peek)
	a.route("POST /v1/keys/reset", a.reset)
	a.route("PUT /v1/plans/{plan}", a.setPlan)
	a.route("PUT /v1/tenants/{tenant}/plan", a.assignPlan)
	a.route("PUT /v1/tenants/{tenant}/overrides/{name}", a.setOverride)
	a.route("DELETE /v1/tenants/{tenant}/overrides/{name}", a.clearOverride)
	a.route("GET /v1/usage", a.usage)
	a.route("GET /v1/ledger", a.ledger)
	a.route("POST /v1/descriptors/peek", a.peekDescriptor)
	a.route("POST /v1/descriptors/reset", a.resetDescriptor)
	a.route("POST "+LoginLinksPath, a.mintLink)
	return a
}

// Routes lists the API's own routes ("METHOD /path/{param}"), in the order
// New registers them; those added by Handle are not listed.
func (a *API) Routes() []string { return append([]string(nil), a.routes...) }

// Handle serves pattern (an http.ServeMux pattern) with h behind the API's
// authentication and audit log: a page of the same admin listener.
func (a *API) Handle(pattern string, h http.Handler) { a.mux.Handle(pattern, h) }

// ServeHTTP authenticates the call, refuses it when a browser sends it
// from another site (see New), serves it and writes its audit line.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	var who string
	var status int
	var msg string
	login := a.cfg.SessionPaths != "" && r.URL.Path == LoginPath
	logout := a.cfg.SessionPaths != "" && r.URL.Path == a.cfg.SessionPaths+LogoutPath
	var logoutRefused bool
	switch {
	case login:
		who = a.serveLogin(rec, r)
	case logout:
		who, logoutRefused = a.serveLogout(rec, r)
	default:
		who, status, msg = a.authenticate(r)
	}
	// Refused for its credentials, or a sign-in call that signed no one in
	// (or a sign-out refused): anyone can send these, so they are audited
	// at a bounded rate.
	refused := status != 0 || who == "bad-link" || who == "bad-token" || login && who != "login-link" && who != "token-form" || logoutRefused
	login = login || logout // answered
	if status == 0 && strings.HasPrefix(who, "session:") && crossSite(r) {
		status, msg = http.StatusForbidden, "cross-site request refused: a browser sent it from another site or origin with the page's session"
	}
	if status == 0 && !login {
		if err := a.sameSite.Check(r); err != nil {
			status, msg = http.StatusForbidden, "cross-origin request refused: a browser sent it from another site ("+err.Error()+")"
		}
	}
	switch {
	case login: // answered
	case status != 0:
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-admin"`)
		}
		writeError(rec, status, msg)
	default:
		a.mux.ServeHTTP(rec, r)
	}
	if refused {
		ok, due := a.gate.allow(r.RemoteAddr, a.cfg.Clock.Now())
		for _, s := range due {
			a.log.LogAttrs(r.Context(), slog.LevelWarn, "admin calls not logged",
				slog.String("remote", s.peer), slog.Int("calls", s.n), slog.Time("since", s.since),
				slog.String("why", "refused for their credentials, past the audit log's rate"))
		}
		if !ok {
			return
		}
	}
	_, pattern := a.mux.Handler(r)
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin call",
		slog.String("who", clip(who, MaxLogField)),
		slog.String("remote", clip(r.RemoteAddr, MaxLogField)),
		slog.String("op", clip(cmpOr(pattern, r.Method+" "+r.URL.Path), MaxLogField)),
		slog.String("target", target(r)),
		slog.Int("status", rec.status),
		slog.String("error", clip(rec.errMsg, MaxLogField)),
		slog.Duration("took", time.Since(start)))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// target is what a call acts on, for the audit line: the path's
// parameters and the query (not a login link's), cut to MaxLogField.
func target(r *http.Request) string {
	t := r.URL.EscapedPath()
	if t == LoginPath {
		return t // a login link's code is a secret until used
	}
	if r.URL.RawQuery != "" {
		t += "?" + r.URL.RawQuery
	}
	return clip(t, MaxLogField)
}

// authenticate returns who makes the call, or the status and message of
// its refusal: 401 without credentials, 403 with a wrong token.
func (a *API) authenticate(r *http.Request) (who string, status int, msg string) {
	if a.cfg.ClientCerts && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		return "cert:" + r.TLS.VerifiedChains[0][0].Subject.String(), 0, ""
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		who, ended := a.session(r)
		if who != "" {
			return who, 0, ""
		}
		if ended {
			return "anonymous", http.StatusUnauthorized, "this browser's session was ended to make room: more than " + strconv.Itoa(MaxSessions) + " sessions signed in since; sign in again at " + LoginPath
		}
		if a.cfg.SessionPaths != "" {
			return "anonymous", http.StatusUnauthorized, "authentication required: send Authorization: Bearer <token>, or in a browser sign in at " + LoginPath
		}
		return "anonymous", http.StatusUnauthorized, "authentication required: send Authorization: Bearer <token>"
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "anonymous", http.StatusUnauthorized, "authentication required: the Authorization scheme must be Bearer"
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if !a.hasToken || subtle.ConstantTimeCompare(sum[:], a.token[:]) != 1 {
		return "bad-token", http.StatusForbidden, "the bearer token is not accepted"
	}
	return "token", 0, ""
}

// recorder keeps the status and error message of a call for its audit
// line.
type recorder struct {
	http.ResponseWriter
	status int
	errMsg string
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the export
// extends its write deadline).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// writeError answers status with {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	if rec, ok := w.(*recorder); ok {
		rec.errMsg = msg
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// writeJSON answers 200 with v.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}

// errStatus answers err: 404 for ErrNotFound, 400 for the caller's
// mistakes, 504 past the call's deadline, 503 otherwise (the store).
func errStatus(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, sluice.ErrBadInput):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, err.Error())
	default:
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("store: %v", err))
	}
}

// route registers one of the API's own routes.
func (a *API) route(pattern string, h http.HandlerFunc) {
	a.routes = append(a.routes, pattern)
	a.mux.HandleFunc(pattern, h)
}
