package daemon

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"
)

// WatchDrain ends the gRPC health service's Watch streams when serve
// drains. A Watch stream lasts as long as its watcher, and GracefulStop
// waits for every stream, so without it one watcher would hold the drain
// for the whole grace. Once drain has been called, each stream ends right
// after it has sent a status other than SERVING (SetServing(false) sends
// NOT_SERVING to every watcher as the drain starts), so that the watcher
// first learns to leave: its call then ends with codes.Unavailable.
//
// The zero value is ready: intercept is its stream interceptor, drain its
// start of the drain.
type WatchDrain struct {
	mu       sync.Mutex
	draining bool
	streams  map[*drainingWatch]struct{}
}

// drainingWatch is one Watch stream: its context is cancelled to end it.
// sent and last (the status sent last) are guarded by the WatchDrain's mu.
type drainingWatch struct {
	grpc.ServerStream
	ctx    context.Context
	cancel context.CancelFunc
	w      *WatchDrain

	sent, ended bool
	last        healthpb.HealthCheckResponse_ServingStatus
}

// Intercept is the stream interceptor that tracks the Watch calls (other
// calls pass through untouched) and ends them as drain says.
func (w *WatchDrain) Intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != HealthWatch {
		return handler(srv, ss)
	}
	ctx, cancel := context.WithCancel(ss.Context())
	d := &drainingWatch{ServerStream: ss, ctx: ctx, cancel: cancel, w: w}
	w.mu.Lock()
	if w.streams == nil {
		w.streams = map[*drainingWatch]struct{}{}
	}
	w.streams[d] = struct{}{}
	w.mu.Unlock()
	err := handler(srv, d)
	w.mu.Lock()
	delete(w.streams, d)
	ended := d.ended
	w.mu.Unlock()
	cancel()
	if ended {
		return grpcstatus.Error(codes.Unavailable, "the server is draining: watch another")
	}
	return err
}

// Drain starts the drain: the streams that have sent a status other than
// SERVING end now, the others after their next such status.
func (w *WatchDrain) Drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.draining = true
	for d := range w.streams {
		d.endIfDrainingLocked()
	}
}

// Context is the stream's context, which drain cancels.
func (d *drainingWatch) Context() context.Context { return d.ctx }

// SendMsg sends m and notes the status it carries; while draining, a
// status other than SERVING ends the stream once sent.
func (d *drainingWatch) SendMsg(m any) error {
	err := d.ServerStream.SendMsg(m)
	r, ok := m.(*healthpb.HealthCheckResponse)
	if err != nil || !ok {
		return err
	}
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	d.sent, d.last = true, r.GetStatus()
	d.endIfDrainingLocked()
	return nil
}

// endIfDrainingLocked ends the stream if serve drains and the watcher has
// been told a status other than SERVING; the WatchDrain's mu is held.
func (d *drainingWatch) endIfDrainingLocked() {
	if d.w.draining && d.sent && d.last != healthpb.HealthCheckResponse_SERVING {
		d.ended = true
		d.cancel()
	}
}
