package gateway

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/bodyrate"
	"github.com/sluicehq/sluice/rlheader"
)

// Timeouts bound how long a client may hold a connection without making
// progress, as NGINX's directives of the same names do. A zero field is
// NGINX's default.
type Timeouts struct {
	// ClientHeader bounds the reading of a request's header, from the
	// first byte (client_header_timeout; default 60 s).
	ClientHeader time.Duration
	// ClientBody bounds the wait between two successive reads of a
	// request's body, not the whole body (client_body_timeout; default
	// 60 s). Past it the request ends with 408 and frees its place.
	ClientBody time.Duration
	// ClientBodyMinRate is the least average rate, in bytes per second,
	// at which a body streaming to the upstream (one larger than the
	// read-ahead buffer) must arrive, as Apache's mod_reqtimeout MinRate:
	// the body must be whole by ClientBody plus one second per
	// ClientBodyMinRate bytes received, counted from when it starts to
	// stream, or the request ends with 408 and frees its place. Without
	// it a client sending a byte just within each ClientBody holds its
	// place for days. Zero is DefaultClientBodyMinRate; negative turns
	// it off (then only ClientBody bounds each read).
	ClientBodyMinRate int64
	// Send bounds the wait for each write of a response to the client,
	// not the whole response (send_timeout; default 60 s). Past it the
	// connection is closed.
	Send time.Duration
	// Keepalive bounds how long an idle keep-alive connection is kept
	// (keepalive_timeout; default 75 s).
	Keepalive time.Duration
}

// NGINX's defaults.
const (
	DefaultClientHeaderTimeout = 60 * time.Second
	DefaultClientBodyTimeout   = 60 * time.Second
	DefaultSendTimeout         = 60 * time.Second
	DefaultKeepaliveTimeout    = 75 * time.Second
)

// DefaultClientBodyMinRate is ClientBodyMinRate's default, 1 KiB/s: a
// hundredth of a slow mobile uplink, so no real client is cut, while a
// body of the default 1 MiB cap holds its place for at most about 18
// minutes (ClientBody + 1024 s) however it is trickled.
const DefaultClientBodyMinRate = bodyrate.DefaultMinRate

// WithDefaults returns t with each zero field set to NGINX's default
// (ClientBodyMinRate, which NGINX lacks, to DefaultClientBodyMinRate).
func (t Timeouts) WithDefaults() Timeouts {
	or := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	return Timeouts{
		ClientHeader: or(t.ClientHeader, DefaultClientHeaderTimeout),
		ClientBody:   or(t.ClientBody, DefaultClientBodyTimeout),
		Send:         or(t.Send, DefaultSendTimeout),
		Keepalive:    or(t.Keepalive, DefaultKeepaliveTimeout),
		// Negative (off) is kept, so that defaults apply once.
		ClientBodyMinRate: cmp.Or(t.ClientBodyMinRate, DefaultClientBodyMinRate),
	}
}

// Server returns an http.Server for h (a Gateway) with t's ClientHeader as
// ReadHeaderTimeout and Keepalive as IdleTimeout (zero fields: the
// defaults), request headers of at most 64 KiB, and its errors logged on
// errorLog at Warn (nil: the standard logger). It sets no ReadTimeout or
// WriteTimeout, which would bound a whole upload or a whole streamed
// response: the Gateway bounds each read and write instead (ClientBody,
// Send); a caller whose handler never streams sets them. It is the one
// place where sluice's HTTP servers are made (sluice proxy's, its admin
// listener's and sluice serve's).
func (t Timeouts) Server(h http.Handler, errorLog *slog.Logger) *http.Server {
	t = t.WithDefaults()
	s := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ClientHeader,
		IdleTimeout:       t.Keepalive,
		MaxHeaderBytes:    64 << 10,
	}
	if errorLog != nil {
		s.ErrorLog = slog.NewLogLogger(errorLog.Handler(), slog.LevelWarn)
	}
	return s
}

// bodyBuffer is the most of a request's body the gateway reads before it
// forwards the request (NGINX's client_body_buffer_size on 64-bit
// platforms): a body that fits is read whole first, so that a client
// trickling it holds no place in max_in_flight or a conns limit; a larger
// body is streamed once this much has arrived.
const bodyBuffer = 16 << 10

// deadlines is what the server's ResponseWriter offers to bound one read
// or write (http.ResponseController's methods of the same names).
type deadlines interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// deadlinesOf returns w's deadlines: the server's own ResponseWriter has
// them, a wrapper reaches them through Unwrap (as http.ResponseController
// does). A ResponseWriter without them (httptest.ResponseRecorder) gets
// deadlines that do nothing.
func deadlinesOf(w http.ResponseWriter) deadlines {
	for {
		switch t := w.(type) {
		case deadlines:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return noDeadlines{}
		}
	}
}

// noDeadlines are the deadlines of a ResponseWriter that has none.
type noDeadlines struct{}

func (noDeadlines) SetReadDeadline(time.Time) error  { return http.ErrNotSupported }
func (noDeadlines) SetWriteDeadline(time.Time) error { return http.ErrNotSupported }

// sendWriter bounds each write to the client by the send timeout, as
// NGINX's send_timeout: a client that does not read for that long loses
// its connection, however long the response streams.
type sendWriter struct {
	http.ResponseWriter
	dl  deadlines
	d   time.Duration
	req *http.Request // the request as routed, for boundedWait's answer
}

func (s *sendWriter) arm() { s.dl.SetWriteDeadline(time.Now().Add(s.d)) }

func (s *sendWriter) Write(p []byte) (int, error) {
	s.arm()
	return s.ResponseWriter.Write(p)
}

func (s *sendWriter) WriteHeader(code int) {
	if code < 200 {
		s.arm() // a 1xx is written at once
	}
	s.ResponseWriter.WriteHeader(code)
}

// FlushError flushes with a fresh deadline (ReverseProxy flushes streamed
// responses through http.ResponseController, which finds this first).
func (s *sendWriter) FlushError() error {
	s.arm()
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// Flush is FlushError for code that asserts http.Flusher.
func (s *sendWriter) Flush() { s.FlushError() }

// Unwrap lets http.ResponseController reach the server's ResponseWriter.
func (s *sendWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// clientBody is a request body read through the gateway: what was read
// ahead, then (for a body larger than bodyBuffer) the rest, each read of
// which must arrive within the body timeout, and the whole of which must
// arrive at the minimum rate on average.
type clientBody struct {
	ahead    []byte
	rest     io.ReadCloser // nil when ahead is the whole body
	orig     io.ReadCloser
	dl       deadlines
	d        time.Duration
	minRate  int64       // bytes per second; <= 0: none
	start    time.Time   // the first read of the rest (zero: none yet)
	streamed int64       // bytes of the rest read since start
	timedOut atomic.Bool // a read of the rest stalled past d or fell below minRate
	tooLarge atomic.Bool // the rest grew past the body cap (see capBody)
	ended    atomic.Bool // the rest was read to its end
}

func (b *clientBody) Read(p []byte) (int, error) {
	if len(b.ahead) > 0 {
		n := copy(p, b.ahead)
		b.ahead = b.ahead[n:]
		if len(b.ahead) == 0 && b.rest == nil {
			return n, io.EOF
		}
		return n, nil
	}
	if b.rest == nil {
		return 0, io.EOF
	}
	n, err := b.readStream(p)
	switch {
	case err == io.EOF:
		b.ended.Store(true)
	case err != nil && isTimeout(err):
		b.timedOut.Store(true)
	case err != nil && isTooLarge(err):
		b.tooLarge.Store(true)
	}
	return n, err
}

// readRest reads from the client within the body timeout. The deadline is
// cleared once the body ends, for the server's own read that notices a
// client going away.
func (b *clientBody) readRest(p []byte) (int, error) {
	b.dl.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.rest.Read(p)
	if err != nil {
		b.dl.SetReadDeadline(time.Time{})
	}
	return n, err
}

// readStream reads the rest of a body streaming to the upstream, within
// the body timeout and the deadline the minimum rate sets: start +
// d + streamed/minRate. Only Read calls it, one read at a time.
func (b *clientBody) readStream(p []byte) (int, error) {
	now := time.Now()
	if b.start.IsZero() {
		b.start = now // not at the read-ahead: the request may wait for its place
	}
	b.dl.SetReadDeadline(bodyrate.Deadline(b.start, now, b.d, b.streamed, b.minRate))
	n, err := b.rest.Read(p)
	b.streamed += int64(n)
	if err != nil {
		b.dl.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (b *clientBody) Close() error { return b.orig.Close() }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// readAhead reads up to bodyBuffer bytes of r's body, each read within the
// body timeout, before the request takes a place in flight: a request is
// "being served" only once its body has arrived (or, for a larger body,
// once it streams to the upstream). It returns false when it has answered
// the request itself: 408 when the body stalled, 400 when it is malformed,
// nothing when the client left. It does nothing the second time.
func (st *state) readAhead(w http.ResponseWriter, r *http.Request, route string) bool {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return true
	}
	if _, done := r.Body.(*clientBody); done {
		return true
	}
	n := bodyBuffer
	if r.ContentLength > 0 && r.ContentLength < bodyBuffer {
		n = int(r.ContentLength) + 1 // room to see the end without another read
	}
	b := &clientBody{ahead: make([]byte, n), rest: r.Body, orig: r.Body, dl: deadlinesOf(w), d: st.timeouts.ClientBody, minRate: st.timeouts.ClientBodyMinRate}
	st.cfg.Metrics.reading(1)
	defer st.cfg.Metrics.reading(-1)
	filled := 0
	var err error
	for filled < n && err == nil {
		var m int
		m, err = b.readRest(b.ahead[filled:])
		filled += m
	}
	b.ahead = b.ahead[:filled]
	switch {
	case err == io.EOF:
		b.rest = nil // the whole body is here
	case err == nil:
		// Larger than the buffer: the rest streams, each read within
		// the body timeout; the deadline waits for the next read.
		b.dl.SetReadDeadline(time.Time{})
	case isTimeout(err):
		st.bodyTimeout(w, r, route)
		return false
	case r.Context().Err() != nil || errors.Is(err, io.ErrUnexpectedEOF):
		st.cfg.Metrics.outcome(route, "cancelled") // the client left
		return false
	case isTooLarge(err):
		st.bodyTooLarge(w, r, route)
		return false
	default:
		w.Header().Set("Connection", "close")
		n := writeProblem(w, rlheader.Problem{Title: http.StatusText(http.StatusBadRequest), Status: http.StatusBadRequest, Detail: "the request body could not be read"}, http.StatusBadRequest)
		st.access(r, http.StatusBadRequest, n, "BAD_BODY", nil)
		st.cfg.Metrics.outcome(route, "error")
		return false
	}
	r.Body = b
	return true
}

// bodyTimeout answers 408 to a request whose body stalled past the body
// timeout or fell below the minimum rate, and closes the connection (the rest of the body is not read).
func (st *state) bodyTimeout(w http.ResponseWriter, r *http.Request, route string) {
	w.Header().Set("Connection", "close")
	detail := "the request body stalled for longer than " + st.timeouts.ClientBody.String()
	if st.timeouts.ClientBodyMinRate > 0 {
		detail += " or arrived at under " + strconv.FormatInt(st.timeouts.ClientBodyMinRate, 10) + " bytes/s"
	}
	n := writeProblem(w, rlheader.Problem{
		Title: "Request Timeout", Status: http.StatusRequestTimeout,
		Detail: detail,
	}, http.StatusRequestTimeout)
	st.access(r, http.StatusRequestTimeout, n, "BODY_TIMEOUT", nil)
	st.cfg.Metrics.outcome(route, "body_timeout")
}

// streamingBody marks the ResponseWriter of a request whose body streams to
// the upstream, so that upstreamError can tell a stalled client from a
// failed upstream.
type streamingBody struct {
	http.ResponseWriter
	body *clientBody
}

// Unwrap lets http.ResponseController reach the server's ResponseWriter.
func (s *streamingBody) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// SetReadDeadline and SetWriteDeadline make a sendWriter its own
// deadlines, so that the body reader finds them without a
// ResponseController.
func (s *sendWriter) SetReadDeadline(t time.Time) error  { return s.dl.SetReadDeadline(t) }
func (s *sendWriter) SetWriteDeadline(t time.Time) error { return s.dl.SetWriteDeadline(t) }

// boundDiscard bounds by the body timeout the reading of what is left of
// r's body once the handler is done: net/http reads up to 256 KiB of an
// unread body before it writes the response, to keep the connection, and
// would wait on a client that stalls in it with no deadline at all (as
// NGINX's lingering_time bounds its discarding). A body read to its end
// needs none.
func (st *state) boundDiscard(dl deadlines, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	if b, ok := r.Body.(*clientBody); ok && (b.rest == nil || b.ended.Load()) {
		return
	}
	dl.SetReadDeadline(time.Now().Add(st.timeouts.ClientBody))
}
