package page

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/clip"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

//go:embed assets
var assets embed.FS

var tmpl = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"rate": func(f float64) string { return formatRate(f) },
	"ago":  func(now, t time.Time) string { return now.Sub(t).Truncate(time.Second).String() },
	"ts":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}).ParseFS(assets, "assets/page.html"))

// Handler is where the page mounts its routes: *admin.API (its Handle
// puts them behind the API's authentication and audit log) or an
// *http.ServeMux.
type Handler interface {
	Handle(pattern string, h http.Handler)
}

// Path is where the page is served; its data and stream are under it.
const Path = "/page"

// Limits of the form's request.
const (
	maxFormBytes   = 16 << 10
	maxFormEntries = 64
	maxFieldBytes  = 1024
	tryTimeout     = 5 * time.Second
)

// Mount registers the page's routes on h:
//
//	GET  /page            the page (HTML)
//	GET  /page/data.json  its data (Snapshot) as JSON
//	GET  /page/events     its data as server-sent events, one per interval
//	POST /page/try        the form: a descriptor's state, spending nothing
//	GET  /page/static/    its script and style sheet
func (p *Page) Mount(h Handler) {
	h.Handle("GET "+Path, http.HandlerFunc(p.serveHTML))
	h.Handle("GET "+Path+"/data.json", http.HandlerFunc(p.serveJSON))
	h.Handle("GET "+Path+"/events", http.HandlerFunc(p.serveEvents))
	h.Handle("POST "+Path+"/try", http.HandlerFunc(p.serveTry))
	static, _ := fs.Sub(assets, "assets")
	h.Handle("GET "+Path+"/static/", http.StripPrefix(Path+"/static/", http.FileServerFS(static)))
}

// view is the template's data.
type view struct {
	Snapshot
	Try      *TryResult
	Interval int64 // milliseconds
}

func (p *Page) serveHTML(w http.ResponseWriter, r *http.Request) {
	p.render(w, http.StatusOK, nil)
}

func (p *Page) render(w http.ResponseWriter, status int, try *TryResult) {
	var b bytes.Buffer
	if err := tmpl.Execute(&b, view{Snapshot: p.Snapshot(), Try: try, Interval: p.cfg.Interval.Milliseconds()}); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Page) serveJSON(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, p.Snapshot())
}

// serveEvents streams the page's data, one "snapshot" event per
// interval, until the client leaves; each write has its own deadline, so
// that the listener's write timeout does not end the stream and a client
// that stops reading is dropped.
func (p *Page) serveEvents(w http.ResponseWriter, r *http.Request) {
	select {
	case <-p.done:
		http.Error(w, "the server is shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	if p.streams.Add(1) > int64(p.cfg.MaxStreams) {
		p.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many event streams open", http.StatusServiceUnavailable)
		return
	}
	defer p.streams.Add(-1)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		b, _ := json.Marshal(p.Snapshot())
		_ = rc.SetWriteDeadline(time.Now().Add(p.cfg.Interval + 10*time.Second))
		if _, err := w.Write(append(append([]byte("event: snapshot\ndata: "), b...), "\n\n"...)); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-p.done:
			return
		case <-t.C:
		}
	}
}

// TryResult is the form's answer: the descriptor's state, read without
// spending.
type TryResult struct {
	Domain  string   `json:"domain"`
	Entries []string `json:"entries"`
	// Error is why the descriptor could not be read; the rest is then
	// empty.
	Error string `json:"error,omitempty"`
	// Matched is whether a rule (or override) applies.
	Matched bool `json:"matched"`
	// Code is OK or OVER_LIMIT.
	Code string `json:"code,omitempty"`
	// Limit is the rule's limit ("10 per MINUTE"), and Name its name.
	Limit string `json:"limit,omitempty"`
	Name  string `json:"name,omitempty"`
	// Remaining is the units left; ResetAfter the time until the window
	// resets (or, over the limit, until one is allowed).
	Remaining  uint32 `json:"remaining"`
	ResetAfter string `json:"reset_after,omitempty"`
	// AtLimit is whether the next request of one unit would be refused:
	// a rule matches and nothing remains.
	AtLimit bool `json:"at_limit"`
}

// serveTry answers the form: the page with the result (the static form
// posts it), or the result as JSON (?format=json, which the script asks).
func (p *Page) serveTry(w http.ResponseWriter, r *http.Request) {
	asJSON := r.URL.Query().Get("format") == "json"
	res, status := p.try(w, r)
	if asJSON {
		writeJSON(w, status, res)
		return
	}
	p.render(w, status, &res)
}

func (p *Page) try(w http.ResponseWriter, r *http.Request) (TryResult, int) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return TryResult{Error: "the form does not parse: " + err.Error()}, http.StatusBadRequest
	}
	req, res, err := parseTry(r.PostForm.Get("domain"), r.PostForm.Get("descriptor"))
	if err != nil {
		res.Error = err.Error()
		return res, http.StatusBadRequest
	}
	box := p.decider.Load()
	if box == nil {
		res.Error = "the service is not running yet"
		return res, http.StatusNotImplemented
	}
	ctx, cancel := context.WithTimeout(r.Context(), tryTimeout)
	defer cancel()
	resp, err := box.d.ShouldRateLimit(ctx, req)
	if err != nil {
		res.Error = err.Error()
		return res, http.StatusServiceUnavailable
	}
	if len(resp.GetStatuses()) != 1 {
		res.Error = "the service answered " + strconv.Itoa(len(resp.GetStatuses())) + " statuses for one descriptor"
		return res, http.StatusServiceUnavailable
	}
	st := resp.GetStatuses()[0]
	res.Code = st.GetCode().String()
	res.Remaining = st.GetLimitRemaining()
	if d := st.GetDurationUntilReset(); d != nil {
		res.ResetAfter = d.AsDuration().Round(time.Millisecond).String()
	}
	if l := st.GetCurrentLimit(); l != nil {
		res.Matched, res.Name = true, l.GetName()
		res.Limit = formatUint(l.GetRequestsPerUnit()) + " per " + l.GetUnit().String()
		res.AtLimit = res.Remaining == 0
	}
	return res, http.StatusOK
}

// parseTry reads the form's domain and its descriptor, one key=value
// entry per line, into a check-only request: hits_addend 0 reads the key
// without spending.
func parseTry(domain, text string) (*pb.RateLimitRequest, TryResult, error) {
	domain = strings.TrimSpace(domain)
	res := TryResult{Domain: domain}
	if domain == "" || len(domain) > maxFieldBytes {
		return nil, res, errors.New("give a domain (at most 1024 bytes)")
	}
	d := &rlpb.RateLimitDescriptor{HitsAddend: wrapperspb.UInt64(0)}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || len(line) > maxFieldBytes {
			return nil, res, errors.New("each line of the descriptor is key=value, at most 1024 bytes: " + truncate(line))
		}
		if len(d.Entries) == maxFormEntries {
			return nil, res, errors.New("at most 64 entries")
		}
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: k, Value: v})
		res.Entries = append(res.Entries, k+"="+v)
	}
	if len(d.Entries) == 0 {
		return nil, res, errors.New("give the descriptor's entries, one key=value per line")
	}
	return &pb.RateLimitRequest{Domain: domain, Descriptors: []*rlpb.RateLimitDescriptor{d}}, res, nil
}

// truncate cuts a client's string to 64 bytes for a message (clip.Ellipsis).
func truncate(s string) string { return clip.Ellipsis(s, 64) }
