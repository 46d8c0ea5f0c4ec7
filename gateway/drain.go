package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// This file keeps a request going upstream after its client hung up, on a
// route whose limits read the response (a cost from a header or trailer, a
// status counted): the upstream's answer is what the request is charged,
// and a client must not lower its bill by leaving before it arrives. The
// proxy reads on, past the client, for at most drainTime and drainBytes of
// the body; past either the upstream request is cancelled, and the request
// stays charged what it reserved.

const (
	// drainTime bounds how long the proxy waits on the upstream's answer
	// (its status, its body to the trailer) once the client has left.
	drainTime = 10 * time.Second
	// drainBytes bounds the body the proxy reads, and discards, once the
	// client has left, looking for the trailer that carries the cost.
	drainBytes = 1 << 20
)

// errDrained is the error of an upstream body read past drainBytes after
// the client left.
var errDrained = errors.New("gateway: the client left and the upstream's response went past the bytes read for its cost")

// drainKey finds a request's *drain among its context's values.
type drainKey struct{}

// drain is the context of a request sent upstream on a route that reads
// the response: it is not cancelled when the client leaves, but drainTime
// later (at once when the client's context ends on a deadline). It also
// carries what the upstream's body needs to hand its trailers to the
// route's settlements when the proxy aborts the response to a client
// that left.
type drain struct {
	context.Context
	client context.Context
	cancel context.CancelFunc
	stop   func() bool // stops the watch on client

	mu     sync.Mutex
	timer  *time.Timer // drainTime after the client left
	header http.Header // the ResponseWriter's, where settlements read costs
}

// outliveClient returns r with a context that outlives its client by
// drainTime, the *drain behind it, and the function that ends it once the
// request is done.
func outliveClient(r *http.Request, header http.Header) (*http.Request, func()) {
	d := &drain{client: r.Context(), header: header}
	d.Context, d.cancel = context.WithCancel(context.WithoutCancel(d.client))
	d.stop = context.AfterFunc(d.client, func() {
		if errors.Is(context.Cause(d.client), context.DeadlineExceeded) {
			d.cancel() // a deadline is not a client leaving: it holds
			return
		}
		d.mu.Lock()
		d.timer = time.AfterFunc(drainTime, d.cancel)
		d.mu.Unlock()
	})
	return r.WithContext(d), d.end
}

// end ends the drain: the watch, the timer and the context.
func (d *drain) end() {
	d.stop()
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
	d.cancel()
}

// Value returns d for drainKey, else what its parent holds.
func (d *drain) Value(key any) any {
	if key == (drainKey{}) {
		return d
	}
	return d.Context.Value(key)
}

// clientLeft reports whether the client of r (the inbound request, or the
// one sent upstream) has gone: on a draining route, even while the
// upstream request goes on.
func clientLeft(r *http.Request) bool {
	if d, ok := r.Context().Value(drainKey{}).(*drain); ok {
		return d.client.Err() != nil
	}
	return r.Context().Err() != nil
}

// drainResponse is the ModifyResponse, before next (nil: none), of a
// route that reads the response: the body of a request sent with a drain
// is read on, within bounds, when the client has left.
func drainResponse(next func(*http.Response) error) func(*http.Response) error {
	return func(res *http.Response) error {
		d, ok := res.Request.Context().Value(drainKey{}).(*drain)
		if ok && res.StatusCode != http.StatusSwitchingProtocols && res.Body != nil && res.Body != http.NoBody {
			res.Body = &drainBody{ReadCloser: res.Body, res: res, d: d}
		}
		if next != nil {
			return next(res)
		}
		return nil
	}
}

// drainBody is an upstream's response body that, once the client has
// left, is read for at most drainBytes more, and on Close (ReverseProxy
// closes it when writing to the client failed) read to its end within
// that bound, so that its trailers arrive; they are then put in the
// route's header map (under http.TrailerPrefix, as ReverseProxy puts
// undeclared trailers) for the settlements.
type drainBody struct {
	io.ReadCloser
	res   *http.Response
	d     *drain
	after int64 // bytes read after the client left
	eof   bool
}

// Read reads the body, and fails past drainBytes after the client left.
func (b *drainBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	if b.d.client.Err() != nil {
		if b.after += int64(n); b.after > drainBytes && !b.eof {
			return n, errDrained
		}
	}
	return n, err
}

// Close reads what is left for the trailers when the client has left,
// hands them over, and closes the body.
func (b *drainBody) Close() error {
	if b.d.client.Err() == nil {
		return b.ReadCloser.Close()
	}
	if !b.eof {
		io.Copy(io.Discard, b) // bounded: Read fails past drainBytes, the context past drainTime
	}
	err := b.ReadCloser.Close()
	if b.eof { // the body's end has filled res.Trailer
		for k, vv := range b.res.Trailer {
			b.d.header[http.TrailerPrefix+k] = append(b.d.header[http.TrailerPrefix+k], vv...)
		}
	}
	return err
}

// readsResponse reports whether one of pol reads the upstream's response:
// a settled cost, or counted statuses.
func readsResponse(pol []httplimit.Policy) bool {
	for i := range pol {
		if pol[i].Settle != nil || !pol[i].CountOnly.IsEmpty() {
			return true
		}
	}
	return false
}
