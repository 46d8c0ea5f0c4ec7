package admin

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/plans"
)

// readBody decodes r's body (at most MaxBodyBytes) into v strictly: a
// body not sent as application/json, an unknown field, a second value or a
// body over the limit is answered (415, 400 or 413) and ok is false.
func (a *API) readBody(w http.ResponseWriter, r *http.Request, v any) (ok bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "the body must be JSON, sent with Content-Type: application/json")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", a.cfg.MaxBodyBytes))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed body: "+err.Error())
		return false
	}
	// Not dec.More, which is false before a stray '}' or ']'.
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		writeError(w, http.StatusBadRequest, "malformed body: data after the JSON object")
		return false
	}
	return true
}

// keyRequest is the body of peek and reset.
type keyRequest struct {
	Key   string          `json:"key"`
	Limit json.RawMessage `json:"limit"`
}

// keyState is a key's state, as peek and reset answer it.
type keyState struct {
	Key          string `json:"key"`
	Allowed      bool   `json:"allowed"`
	Remaining    int    `json:"remaining"`
	Capacity     int    `json:"capacity"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	Refunded     int    `json:"refunded,omitempty"`
}

// keyCall reads a peek or reset body: the key and its limit, checked.
func (a *API) keyCall(w http.ResponseWriter, r *http.Request) (string, sluice.Limit, sluice.Peeker, bool) {
	pk, isPeeker := a.cfg.Limiter.(sluice.Peeker)
	if !isPeeker {
		writeError(w, http.StatusNotImplemented, "the store cannot read a key's state")
		return "", sluice.Limit{}, nil, false
	}
	var req keyRequest
	if !a.readBody(w, r, &req) {
		return "", sluice.Limit{}, nil, false
	}
	if len(req.Limit) == 0 {
		writeError(w, http.StatusBadRequest, "malformed body: limit is required")
		return "", sluice.Limit{}, nil, false
	}
	lim, err := plans.ParseLimit(req.Limit)
	if err == nil {
		err = sluice.CheckPeek(req.Key, lim)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed body: "+err.Error())
		return "", sluice.Limit{}, nil, false
	}
	return req.Key, lim, pk, true
}

func state(key string, lim sluice.Limit, res sluice.Result) keyState {
	return keyState{Key: key, Allowed: res.Allowed, Remaining: res.Remaining, Capacity: lim.Capacity(),
		RetryAfterMS: res.RetryAfter.Milliseconds(), ResetAfterMS: res.ResetAfter.Milliseconds()}
}

// peek answers a key's state without spending.
func (a *API) peek(w http.ResponseWriter, r *http.Request) { a.answerKey(w, r, nil) }

// reset gives back what the key has spent in its current window (a peek,
// then a refund of the difference to the capacity), and answers its state
// after.
func (a *API) reset(w http.ResponseWriter, r *http.Request) {
	rf, isRefunder := a.cfg.Limiter.(sluice.Refunder)
	if !isRefunder {
		writeError(w, http.StatusNotImplemented, "the store cannot refund, so cannot reset a key")
		return
	}
	a.answerKey(w, r, func(ctx context.Context, key string, lim sluice.Limit, res sluice.Result) (int, error) {
		spent := lim.Capacity() - res.Remaining
		if spent <= 0 {
			return 0, nil
		}
		return spent, rf.RefundN(ctx, key, lim, spent)
	})
}

// answerKey answers a peek or reset body with the key's state: read, then,
// if change is not nil, changed by it (given the state read, it returns
// the units refunded) and read again.
func (a *API) answerKey(w http.ResponseWriter, r *http.Request, change func(context.Context, string, sluice.Limit, sluice.Result) (int, error)) {
	key, lim, pk, ok := a.keyCall(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Timeout)
	defer cancel()
	res, err := pk.Peek(ctx, key, lim)
	refunded := 0
	if err == nil && change != nil {
		refunded, err = change(ctx, key, lim, res)
		if err == nil {
			res, err = pk.Peek(ctx, key, lim)
		}
	}
	if err != nil {
		errStatus(w, err)
		return
	}
	st := state(key, lim, res)
	st.Refunded = refunded
	writeJSON(w, st)
}

// planWriter returns the PlanWriter, or answers 501.
func (a *API) planWriter(w http.ResponseWriter) PlanWriter {
	if a.cfg.Plans == nil {
		writeError(w, http.StatusNotImplemented, "plans are not configured (they need a PostgreSQL store)")
	}
	return a.cfg.Plans
}

// names checks the path's parameters.
func names(w http.ResponseWriter, r *http.Request, params ...string) bool {
	for _, p := range params {
		if err := plans.CheckName(r.PathValue(p)); err != nil {
			writeError(w, http.StatusBadRequest, p+": "+err.Error())
			return false
		}
	}
	return true
}

// changed tells Config.Changed, then answers 204.
func (a *API) changed(w http.ResponseWriter, tenant string) {
	if a.cfg.Changed != nil {
		a.cfg.Changed(tenant)
	}
	w.WriteHeader(http.StatusNoContent)
}

// setPlan creates or replaces a plan's limits.
func (a *API) setPlan(w http.ResponseWriter, r *http.Request) {
	pw := a.planWriter(w)
	if pw == nil || !names(w, r, "plan") {
		return
	}
	var req struct {
		Limits json.RawMessage `json:"limits"`
	}
	if !a.readBody(w, r, &req) {
		return
	}
	if !validField(w, "limits", req.Limits, func(b []byte) error {
		lims, err := plans.ParseLimits(b)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(lims))
		for name := range lims {
			names = append(names, name)
		}
		slices.Sort(names) // the first refused, the same on every call
		for _, name := range names {
			if err := a.storeServes(lims[name]); err != nil {
				return fmt.Errorf("limit %q: %w", name, err)
			}
		}
		return nil
	}) {
		return
	}
	a.change(w, r, "", func(ctx context.Context) error {
		return pw.SetPlan(ctx, r.PathValue("plan"), compact(req.Limits))
	})
}

// storeServes returns nil when the store the limits run on serves lim
// (Config.ValidateLimit, else the Limiter's sluice.LimitValidator), else
// why not: every request decided on lim would fail with that error.
func (a *API) storeServes(lim sluice.Limit) error {
	v := a.cfg.ValidateLimit
	if lv, ok := a.cfg.Limiter.(sluice.LimitValidator); ok && v == nil {
		v = lv.ValidateLimit
	}
	if v == nil {
		return nil
	}
	if err := v(lim); err != nil {
		return fmt.Errorf("the store cannot serve it, so every request of its tenants would fail: %w", err)
	}
	return nil
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// assignPlan puts a tenant on a plan ("" takes it off).
func (a *API) assignPlan(w http.ResponseWriter, r *http.Request) {
	pw := a.planWriter(w)
	if pw == nil || !names(w, r, "tenant") {
		return
	}
	var req struct {
		Plan *string `json:"plan"`
	}
	if !a.readBody(w, r, &req) {
		return
	}
	if req.Plan == nil {
		writeError(w, http.StatusBadRequest, "malformed body: plan is required (\"\" to take the tenant off its plan)")
		return
	}
	if *req.Plan != "" {
		if err := plans.CheckName(*req.Plan); err != nil {
			writeError(w, http.StatusBadRequest, "malformed body: plan: "+err.Error())
			return
		}
	}
	a.change(w, r, r.PathValue("tenant"), func(ctx context.Context) error {
		return pw.AssignPlan(ctx, r.PathValue("tenant"), *req.Plan)
	})
}

// change runs op, a write to the plans store, under the configured timeout
// and answers as changed does for tenant ("" for a plan), or with the
// status of op's error.
func (a *API) change(w http.ResponseWriter, r *http.Request, tenant string, op func(context.Context) error) {
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Timeout)
	defer cancel()
	if err := op(ctx); err != nil {
		errStatus(w, err)
		return
	}
	a.changed(w, tenant)
}

// validField reports whether raw, the body's field name, is present and
// parses; if not, it answers 400 naming the field and why.
func validField(w http.ResponseWriter, name string, raw json.RawMessage, parse func([]byte) error) bool {
	if len(raw) == 0 {
		writeError(w, http.StatusBadRequest, "malformed body: "+name+": required")
		return false
	}
	if err := parse(raw); err != nil {
		writeError(w, http.StatusBadRequest, "malformed body: "+name+": "+err.Error())
		return false
	}
	return true
}

// setOverride sets a tenant's override of a limit name, until an optional
// expiry.
func (a *API) setOverride(w http.ResponseWriter, r *http.Request) {
	pw := a.planWriter(w)
	if pw == nil || !names(w, r, "tenant", "name") {
		return
	}
	var req struct {
		Limit   json.RawMessage `json:"limit"`
		Expires *time.Time      `json:"expires"`
	}
	if !a.readBody(w, r, &req) {
		return
	}
	if !validField(w, "limit", req.Limit, func(b []byte) error {
		lim, err := plans.ParseLimit(b)
		if err != nil {
			return err
		}
		return a.storeServes(lim)
	}) {
		return
	}
	var exp time.Time
	if req.Expires != nil {
		if exp = *req.Expires; !exp.After(a.cfg.Clock.Now()) {
			writeError(w, http.StatusBadRequest, "malformed body: expires is not in the future")
			return
		}
	}
	a.change(w, r, r.PathValue("tenant"), func(ctx context.Context) error {
		return pw.SetOverride(ctx, r.PathValue("tenant"), r.PathValue("name"), compact(req.Limit), exp)
	})
}

// clearOverride deletes a tenant's override.
func (a *API) clearOverride(w http.ResponseWriter, r *http.Request) {
	pw := a.planWriter(w)
	if pw == nil || !names(w, r, "tenant", "name") {
		return
	}
	a.change(w, r, r.PathValue("tenant"), func(ctx context.Context) error {
		return pw.ClearOverride(ctx, r.PathValue("tenant"), r.PathValue("name"))
	})
}

// usage lists a key's periods.
func (a *API) usage(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Usage == nil {
		writeError(w, http.StatusNotImplemented, "usage needs a PostgreSQL store")
		return
	}
	key := r.URL.Query().Get("key")
	if err := sluice.CheckPeek(key, sluice.PerSecond(1)); err != nil {
		writeError(w, http.StatusBadRequest, "key: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Timeout)
	defer cancel()
	ps, err := a.cfg.Usage.Usage(ctx, key)
	if err != nil {
		errStatus(w, err)
		return
	}
	if ps == nil {
		ps = []Period{}
	}
	writeJSON(w, struct {
		Key     string   `json:"key"`
		Periods []Period `json:"periods"`
	}{key, ps})
}

// ledgerQuery reads the export's range and format.
func ledgerQuery(r *http.Request) (from, to time.Time, format string, err error) {
	q := r.URL.Query()
	if from, err = time.Parse(time.RFC3339, q.Get("from")); err != nil {
		return from, to, "", fmt.Errorf("from: want an RFC 3339 time: %w", err)
	}
	if to, err = time.Parse(time.RFC3339, q.Get("to")); err != nil {
		return from, to, "", fmt.Errorf("to: want an RFC 3339 time: %w", err)
	}
	if !to.After(from) {
		return from, to, "", errors.New("to must be after from")
	}
	switch format = cmpOr(q.Get("format"), "json"); format {
	case "json", "csv":
	default:
		return from, to, "", fmt.Errorf("format %q: want csv or json", format)
	}
	return from, to, format, nil
}

// ledger streams every period that starts in [from, to) as CSV or JSON.
// Once the first row is written the status is 200; an error after it cuts
// the body short (a JSON export then does not end with "]", a CSV export
// ends with a line "error,<message>").
func (a *API) ledger(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Usage == nil {
		writeError(w, http.StatusNotImplemented, "the ledger needs a PostgreSQL store")
		return
	}
	from, to, format, err := ledgerQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.ExportTimeout)
	defer cancel()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(a.cfg.ExportTimeout))
	ex := &exporter{w: w, format: format}
	err = a.cfg.Usage.Ledger(ctx, from, to, ex.row)
	ex.finish(err)
	if err != nil {
		if rec, ok := w.(*recorder); ok {
			rec.errMsg = err.Error()
		}
		if !ex.started {
			errStatus(w, err)
		}
	}
}

// exporter writes the ledger's rows as they come.
type exporter struct {
	w       http.ResponseWriter
	format  string
	cw      *csv.Writer
	enc     *json.Encoder
	started bool
}

func (e *exporter) start() {
	e.started = true
	if e.format == "csv" {
		e.w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		e.cw = csv.NewWriter(e.w)
		_ = e.cw.Write([]string{"key", "start", "end", "count", "quota", "updated"})
		return
	}
	e.w.Header().Set("Content-Type", "application/json")
	e.enc = json.NewEncoder(e.w)
	_, _ = io.WriteString(e.w, "[")
}

func (e *exporter) row(en Entry) error {
	first := !e.started
	if first {
		e.start()
	}
	if e.cw != nil {
		e.cw.Write([]string{en.Key, en.Start.UTC().Format(time.RFC3339Nano), en.End.UTC().Format(time.RFC3339Nano),
			strconv.FormatInt(en.Count, 10), strconv.FormatInt(en.Quota, 10), en.Updated.UTC().Format(time.RFC3339Nano)})
		e.cw.Flush()
		return e.cw.Error()
	}
	if !first {
		if _, err := io.WriteString(e.w, ","); err != nil {
			return err
		}
	}
	return e.enc.Encode(en)
}

// finish ends the body: "]" for JSON, an error line for CSV.
func (e *exporter) finish(err error) {
	if err != nil && !e.started {
		return
	}
	if !e.started {
		e.start()
	}
	switch {
	case e.cw != nil && err != nil:
		e.cw.Write([]string{"error", err.Error()})
		e.cw.Flush()
	case e.cw != nil:
		e.cw.Flush()
	case err == nil:
		_, _ = io.WriteString(e.w, "]\n")
	}
}
