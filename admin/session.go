package admin

// Browser sign-in. A browser cannot send the bearer token by itself, and
// a client certificate is more than most operators set up for a glance at
// the live page. So the API mints one-time login links (at start-up, and
// on request through POST /v1/login-links, which needs the token), and
// takes the token in a form; either sets a session cookie that
// authenticates the page's paths (Config.SessionPaths) and nothing else:
// a session can watch and try descriptors, never reset a key or change a
// plan. A POST to the page's path + LogoutPath (/page/logout) ends the
// session: it forgets it and clears the cookie.
//
// What keeps it safe:
//   - a link's code is 256 random bits, kept only as its SHA-256, good for
//     one use within LoginLinkTTL; a code used or expired is refused (and
//     forgotten), and at most MaxLoginLinks wait at once (the oldest gives
//     way);
//   - the session cookie is HttpOnly (no script reads it), SameSite=Strict
//     (a browser sends it on no request another site starts, a link
//     followed from elsewhere included), Secure on a TLS listener, scoped
//     to the page's path, and lasts SessionTTL; sessions are kept as
//     hashes, at most MaxSessions: the one ending first gives way to a new
//     sign-in, with an audit line that names it, and the browser that held
//     it is told so (401) on its next call;
//   - a request authenticated by the cookie that a browser says another
//     site or origin started (Sec-Fetch-Site) is refused 403, whatever its
//     method, and the token form is refused from another site as every
//     change is (see New);
//   - every sign-in, failed ones included, is audited as any call.

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"html/template"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Paths and bounds of browser sign-in.
const (
	// LoginPath is the sign-in page: GET with ?code= uses a login link,
	// GET without it shows the token form, POST takes the form.
	LoginPath = "/login"
	// LoginLinksPath mints a login link: POST, authenticated as any
	// call; the answer is {"url", "expires"}.
	LoginLinksPath = "/v1/login-links"
	// LogoutPath, under Config.SessionPaths (where the cookie is sent),
	// ends the browser's session: POST only, refused from another site
	// or origin as the token form is; it forgets the session, clears the
	// cookie and sends the browser to LoginPath (303), signed in or not.
	LogoutPath = "/logout"
	// SessionCookie is the name of the session cookie.
	SessionCookie = "sluice_session"
	// LoginLinkTTL is how long a login link can be used (once).
	LoginLinkTTL = 5 * time.Minute
	// SessionTTL is how long a session lasts.
	SessionTTL = 8 * time.Hour
	// MaxLoginLinks bounds the links not yet used; MaxSessions the
	// sessions.
	MaxLoginLinks = 16
	MaxSessions   = 64
	// maxLoginForm bounds the token form's body.
	maxLoginForm = 4 << 10
)

// sessions holds the login links' and the sessions' hashes, with when
// each ends.
type sessions struct {
	mu    sync.Mutex
	links map[[32]byte]time.Time
	live  map[[32]byte]time.Time
	// ended holds the sessions that gave way to a new sign-in, until they
	// would have ended, at most MaxSessions: a call with one is told why
	// it is refused.
	ended map[[32]byte]time.Time
}

// secret returns 256 random bits in base64url and their hash.
func secret() (string, [32]byte) {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	s := base64.RawURLEncoding.EncodeToString(b)
	return s, sha256.Sum256([]byte(s))
}

// add keeps h until end in m, bounded to limit: the entry that ends first
// gives way (for links, the oldest, since all last as long). It calls
// gone, when not nil, with each entry that gave way before its end.
func add(m map[[32]byte]time.Time, h [32]byte, end time.Time, limit int, now time.Time, gone func(h [32]byte, end time.Time)) {
	for k, e := range m {
		if !e.After(now) {
			delete(m, k)
		}
	}
	for len(m) >= limit {
		var first [32]byte
		var at time.Time
		for k, e := range m {
			if at.IsZero() || e.Before(at) {
				first, at = k, e
			}
		}
		delete(m, first)
		if gone != nil {
			gone(first, at)
		}
	}
	m[h] = end
}

// take reports whether s is in m and not expired, removing it when
// once is set (a link) and when expired.
func take(m map[[32]byte]time.Time, s string, now time.Time, once bool) bool {
	h := sha256.Sum256([]byte(s))
	end, ok := m[h]
	if !ok {
		return false
	}
	if once || !end.After(now) {
		delete(m, h)
	}
	return end.After(now)
}

// LoginLink mints a one-time login link on base, the admin listener's URL
// as a browser reaches it (such as http://127.0.0.1:9901): good for one
// use within LoginLinkTTL. It returns "" when browser sign-in is off
// (Config.SessionPaths empty).
func (a *API) LoginLink(base string) (link string, expires time.Time) {
	if a.cfg.SessionPaths == "" {
		return "", time.Time{}
	}
	code, h := secret()
	now := a.cfg.Clock.Now()
	expires = now.Add(LoginLinkTTL)
	a.sess.mu.Lock()
	add(a.sess.links, h, expires, MaxLoginLinks, now, nil)
	a.sess.mu.Unlock()
	return strings.TrimRight(base, "/") + LoginPath + "?code=" + code, expires
}

// mintLink answers POST /v1/login-links: a new link on the URL the caller
// reached the API by.
func (a *API) mintLink(w http.ResponseWriter, r *http.Request) {
	if a.cfg.SessionPaths == "" {
		writeError(w, http.StatusNotImplemented, "browser sign-in is off here (no live page)")
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	link, exp := a.LoginLink(scheme + "://" + r.Host)
	writeJSON(w, struct {
		URL     string    `json:"url"`
		Expires time.Time `json:"expires"`
	}{link, exp.UTC()})
}

// session returns who a request's session cookie authenticates, "" for
// none: only on the page's paths. ended reports a cookie whose session
// gave way to a new sign-in (past MaxSessions) before it would have ended.
func (a *API) session(r *http.Request) (who string, ended bool) {
	// A clean path only: "/page/../v1/keys/reset" is not the page's
	// (ServeMux would redirect it rather than serve it; this does not
	// rely on that).
	if a.cfg.SessionPaths == "" || path.Clean(r.URL.Path) != r.URL.Path || !underPath(r.URL.Path, a.cfg.SessionPaths) {
		return "", false
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 64 {
		return "", false
	}
	now := a.cfg.Clock.Now()
	a.sess.mu.Lock()
	ok := take(a.sess.live, c.Value, now, false)
	if !ok {
		ended = take(a.sess.ended, c.Value, now, false)
	}
	a.sess.mu.Unlock()
	if !ok {
		return "", ended
	}
	return sessionID(sha256.Sum256([]byte(c.Value))), false
}

// sessionID names the session of hash h in the audit log: the first 6
// bytes of the hash of its cookie, which tell sessions apart and let no
// one rebuild the cookie.
func sessionID(h [32]byte) string {
	return "session:" + base64.RawURLEncoding.EncodeToString(h[:6])
}

// underPath reports whether path is prefix or under it.
func underPath(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// crossSite reports whether a browser says another site or origin
// started the request (Sec-Fetch-Site); a request without the header
// (not a browser, or an old one) is not.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return false
	}
	return true
}

// startSession sets a new session's cookie on w.
func (a *API) startSession(w http.ResponseWriter, r *http.Request) {
	id, h := secret()
	now := a.cfg.Clock.Now()
	var gone []string
	a.sess.mu.Lock()
	add(a.sess.live, h, now.Add(SessionTTL), MaxSessions, now, func(old [32]byte, end time.Time) {
		add(a.sess.ended, old, end, MaxSessions, now, nil)
		gone = append(gone, sessionID(old))
	})
	a.sess.mu.Unlock()
	for _, who := range gone {
		a.log.LogAttrs(r.Context(), slog.LevelWarn, "admin session ended",
			slog.String("who", who), slog.String("for", sessionID(h)),
			slog.String("why", "a new sign-in past the most sessions kept at once ("+strconv.Itoa(MaxSessions)+"): the one ending first gave way"))
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: id, Path: a.cfg.SessionPaths,
		MaxAge: int(SessionTTL / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// serveLogout serves Config.SessionPaths + LogoutPath. It returns who
// signed out ("anonymous" for a request with no live session) for the
// audit line, and whether it counts as refused for the audit log's rate:
// a sign-out that signed no one out (no cookie, or one no longer live)
// does, since anyone can send it.
func (a *API) serveLogout(w http.ResponseWriter, r *http.Request) (who string, refused bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "sign out with POST")
		return "anonymous", true
	}
	if err := a.sameSite.Check(r); err != nil || crossSite(r) {
		writeError(w, http.StatusForbidden, "cross-origin sign-out refused: a browser sent it from another site")
		return "anonymous", true
	}
	who = "anonymous"
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" && len(c.Value) <= 64 {
		h := sha256.Sum256([]byte(c.Value))
		a.sess.mu.Lock()
		if end, ok := a.sess.live[h]; ok {
			delete(a.sess.live, h)
			if end.After(a.cfg.Clock.Now()) {
				who = "session:" + base64.RawURLEncoding.EncodeToString(h[:6])
			}
		}
		a.sess.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: a.cfg.SessionPaths,
		MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", LoginPath)
	w.WriteHeader(http.StatusSeeOther)
	return who, who == "anonymous"
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Next}}<meta http-equiv="refresh" content="0; url={{.Next}}">{{end}}
<title>Sluice: sign in</title></head>
<body><main>
<h1>Sluice admin</h1>
{{if .Next}}<p id="signed-in">Signed in. <a href="{{.Next}}">Open the live page</a>.</p>
{{else}}{{if .Error}}<p id="login-error" role="alert">{{.Error}}</p>{{end}}
<form id="login" method="post" action="{{.Action}}">
<label for="token">Admin token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<p>Or open a one-time link: <code>sluice admin login</code> prints one (the log prints one at start-up).</p>
{{end}}</main></body></html>
`))

// loginView is the sign-in page's data.
type loginView struct {
	Next, Error, Action string
}

// renderLogin answers the sign-in page.
func renderLogin(w http.ResponseWriter, status int, v loginView) {
	v.Action = LoginPath
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer") // the code is in the URL
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'")
	if rec, ok := w.(*recorder); ok && v.Error != "" {
		rec.errMsg = v.Error
	}
	w.WriteHeader(status)
	_ = loginPage.Execute(w, v)
}

// serveLogin serves LoginPath: a link's code, the form, or the form's
// token. It returns who signed in ("" for nobody) for the audit line.
func (a *API) serveLogin(w http.ResponseWriter, r *http.Request) (who string) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		code := r.URL.Query().Get("code")
		if code == "" || r.Method == http.MethodHead { // a HEAD (a link checker's) uses no link
			renderLogin(w, http.StatusOK, loginView{})
			return "anonymous"
		}
		a.sess.mu.Lock()
		ok := len(code) <= 64 && take(a.sess.links, code, a.cfg.Clock.Now(), true)
		a.sess.mu.Unlock()
		if !ok {
			renderLogin(w, http.StatusForbidden, loginView{Error: "This login link was used already or has expired (links last " + LoginLinkTTL.String() + " and open once). Run sluice admin login for a new one, or sign in with the admin token."})
			return "bad-link"
		}
		a.startSession(w, r)
		renderLogin(w, http.StatusOK, loginView{Next: a.cfg.SessionPaths})
		return "login-link"
	case http.MethodPost:
		if err := a.sameSite.Check(r); err != nil || crossSite(r) {
			writeError(w, http.StatusForbidden, "cross-origin sign-in refused: a browser sent it from another site")
			return "anonymous"
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
		if err := r.ParseForm(); err != nil {
			renderLogin(w, http.StatusBadRequest, loginView{Error: "The form does not parse."})
			return "anonymous"
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(r.PostForm.Get("token"))))
		if !a.hasToken || subtle.ConstantTimeCompare(sum[:], a.token[:]) != 1 {
			renderLogin(w, http.StatusForbidden, loginView{Error: "That is not the admin token."})
			return "bad-token"
		}
		a.startSession(w, r)
		w.Header().Set("Location", a.cfg.SessionPaths)
		w.WriteHeader(http.StatusSeeOther)
		return "token-form"
	}
	w.Header().Set("Allow", "GET, HEAD, POST")
	writeError(w, http.StatusMethodNotAllowed, "sign in with GET or POST")
	return "anonymous"
}
