package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// AdaptivePolicy sheds load with an adaptive concurrency limiter (package
// adaptive): a request is admitted while fewer requests are in flight than
// the limiter's current limit allows for its priority, and refused at once
// otherwise. The limit follows the handler's measured latency, so it falls
// when the handler slows down because it is past its capacity. A request's
// latency runs from its admission until its response header is written (or
// the handler returns without writing one), so that a client reading the
// body slowly does not pass for a slow handler; it holds its place until
// the handler returns.
//
// A refusal is load shedding, not a rate limit: it is answered 503 Service
// Unavailable (whatever Config.StatusCode says), with Retry-After, the
// reason header naming the policy and what the rate limits charged given
// back. It is counted in Metrics under outcome "shed", and the limiter's
// current limit, requests in flight and latency are gauges there.
type AdaptivePolicy struct {
	// Name identifies the policy, as Policy.Name does.
	Name string
	// Limiter admits the requests and learns their latency. Required. It
	// may be shared with other policies, Middlewares or faces (a gRPC
	// interceptor) that send work to the same backend.
	Limiter *adaptive.Limiter
	// Priority returns a request's priority; nil means adaptive.Default
	// for every request. See PriorityFromHeader and PriorityByMethod.
	Priority func(r *http.Request) adaptive.Priority
	// Outcome classifies a response by its status for the limiter; nil
	// means DefaultAdaptiveOutcome. A request whose client went away is
	// adaptive.Ignored whatever it says.
	Outcome func(status int) adaptive.Outcome
	// MinRetryAfter is the least Retry-After of a refusal; the limiter's
	// recent mean latency is used when longer. Zero means one second,
	// the least that Retry-After can say.
	MinRetryAfter time.Duration
	// Shadow counts and logs the requests the policy would refuse and
	// refuses none. Shadowed requests still take their place in flight,
	// so the limit is learned as if enforced.
	Shadow bool
}

// DefaultAdaptiveOutcome is AdaptivePolicy.Outcome's default: 502, 503 and
// 504, and 429 (a backend refusing for load), are adaptive.Dropped, signs
// of overload; every other status is a Success sample, as the handler did
// its work however it answered.
func DefaultAdaptiveOutcome(status int) adaptive.Outcome {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return adaptive.Dropped
	}
	return adaptive.Success
}

// PriorityFromHeader returns an AdaptivePolicy.Priority that reads the
// request header name ("sheddable", "default" or "critical", exactly); a
// request without it, or with any other value, gets fallback. A client can
// claim any priority this way: use it behind a proxy that sets or strips
// the header, or to let clients mark their own work sheddable.
func PriorityFromHeader(name string, fallback adaptive.Priority) func(r *http.Request) adaptive.Priority {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) adaptive.Priority {
		vs := r.Header[name]
		if len(vs) == 0 {
			return fallback
		}
		p, err := adaptive.ParsePriority(vs[0])
		if err != nil || vs[0] == "" {
			return fallback
		}
		return p
	}
}

// PriorityByMethod returns an AdaptivePolicy.Priority that gives a request
// the priority of its method in byMethod (keys in upper case, as
// net/http's constants; the method is compared as the client sent it),
// and fallback to any method not there. The map is copied.
func PriorityByMethod(byMethod map[string]adaptive.Priority, fallback adaptive.Priority) func(r *http.Request) adaptive.Priority {
	m := make(map[string]adaptive.Priority, len(byMethod))
	for k, v := range byMethod {
		m[k] = v
	}
	return func(r *http.Request) adaptive.Priority {
		if p, ok := m[r.Method]; ok {
			return p
		}
		return fallback
	}
}

// compileAdaptive checks the adaptive policies, taking their names.
func compileAdaptive(list []AdaptivePolicy, names policyNames) ([]AdaptivePolicy, error) {
	out := make([]AdaptivePolicy, 0, len(list))
	for _, a := range list {
		if err := names.add(a.Name); err != nil {
			return nil, err
		}
		if a.Limiter == nil {
			return nil, fmt.Errorf("httplimit: adaptive policy %q has no Limiter", a.Name)
		}
		if a.MinRetryAfter < 0 {
			return nil, errors.New("httplimit: adaptive policy " + a.Name + ": negative MinRetryAfter")
		}
		if a.Outcome == nil {
			a.Outcome = DefaultAdaptiveOutcome
		}
		if a.MinRetryAfter == 0 {
			a.MinRetryAfter = time.Second
		}
		out = append(out, a)
	}
	return out, nil
}

// maxAdaptive is the most adaptive policies a request goes through without
// an allocation for their tokens.
const maxAdaptive = 4

// serveAdaptive runs the request through the adaptive policies and, if
// they admit it, next, timing it for each limiter. A request refused gets
// back what the rate limits charged (decisions). Every token taken is
// ended, also when a later policy refuses or next panics (without a
// sample then).
func (m *Middleware) serveAdaptive(w http.ResponseWriter, r *http.Request, decisions []decision, next http.Handler) {
	ctx := r.Context()
	var buf [maxAdaptive]adaptive.Token
	toks := buf[:0]
	finished := false
	defer func() {
		if !finished { // refused, or next panicked: no sample
			for _, t := range toks {
				t.Release()
			}
		}
	}()
	for i := range m.adaptive {
		a := &m.adaptive[i]
		p := adaptive.Default
		if a.Priority != nil {
			p = a.Priority(r)
		}
		tok, ok := a.Limiter.Acquire(ctx, p)
		if !ok {
			if ctx.Err() != nil {
				return // the client went away: no one to answer
			}
			m.logRefusal(ctx, r, a.Name, "", a.Shadow, "reason", "adaptive", "priority", p.String(), "limit", a.Limiter.Limit())
			if a.Shadow {
				m.cfg.Metrics.decision(a.Name, "shadow_shed")
				m.observe(a.Name, Shadow, 1, "")
				continue
			}
			m.shed(w, r, a, decisions)
			return
		}
		toks = append(toks, tok)
	}
	sw := statusWriters.Get().(*statusWriter)
	sw.ResponseWriter = w
	start := time.Now()
	next.ServeHTTP(sw, r)
	finished = true
	// The sample ends when the response's header was written (or the
	// handler returned without writing), not when its body was: a client
	// that reads slowly must not pass for a slow backend.
	end := sw.wrote
	if end.IsZero() {
		end = time.Now()
	}
	rtt := max(end.Sub(start), 1) // a zero latency would be no sample
	gone := ctx.Err() != nil
	for i, t := range toks {
		o := adaptive.Ignored
		if !gone {
			o = m.adaptive[i].Outcome(sw.status())
		}
		t.Record(rtt, o)
	}
	// The handler has returned, so it may no longer use sw (net/http's
	// contract for a ResponseWriter); one that panicked is not reused.
	*sw = statusWriter{}
	statusWriters.Put(sw)
}

// statusWriters recycles the statusWriters of requests whose handler
// returned, so that an admitted request allocates none.
var statusWriters = sync.Pool{New: func() any { return new(statusWriter) }}

// shed answers a request that adaptive policy a refuses: 503 with
// Retry-After, what the rate limits charged given back and their headers
// removed.
func (m *Middleware) shed(w http.ResponseWriter, r *http.Request, a *AdaptivePolicy, decisions []decision) {
	m.cfg.Metrics.decision(a.Name, "shed")
	m.observe(a.Name, Limited, 1, "")
	m.giveBack(r.Context(), decisions)
	m.clearHeaders(w.Header())
	wait := max(a.Limiter.RetryAfter(), a.MinRetryAfter)
	m.reject(w, r, Rejection{Status: http.StatusServiceUnavailable, Policies: []string{a.Name}, RetryAfter: wait})
}

// statusWriter remembers the status a handler answered with, for the
// adaptive limiter's outcome.
type statusWriter struct {
	http.ResponseWriter
	code  int       // 0 until WriteHeader or Write
	wrote time.Time // when code was set
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 && code >= 200 {
		s.code, s.wrote = code, time.Now()
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.code == 0 {
		s.code, s.wrote = http.StatusOK, time.Now()
	}
	return s.ResponseWriter.Write(p)
}

// status is the status answered: 200 when the handler wrote nothing.
func (s *statusWriter) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// Unwrap lets http.ResponseController reach the underlying ResponseWriter
// (flushes, deadlines, hijacks).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush flushes the underlying ResponseWriter when it can, for handlers
// that assert http.Flusher.
func (s *statusWriter) Flush() {
	if s.code == 0 {
		s.code, s.wrote = http.StatusOK, time.Now()
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}
