package rlqstest

import (
	"context"
	"io"
	"sync"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Conn is the client's side of one RLQS stream: a
// grpc.BidiStreamingClient of the service has these methods, and so has
// what Pipe returns.
type Conn interface {
	Send(*rlqspb.RateLimitQuotaUsageReports) error
	Recv() (*rlqspb.RateLimitQuotaResponse, error)
	CloseSend() error
}

// Handler is the server's stream method, such as rlqs.Server's
// StreamRateLimitQuotas.
type Handler func(grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]) error

// Pipe runs h on an in-memory stream, in a goroutine, and returns the
// client's side; md is the stream's incoming metadata. Cancelling ctx
// disconnects the client. Everything blocks only on channels, so that a
// test in a synctest bubble can let its fake time run.
func Pipe(ctx context.Context, md metadata.MD, h Handler) Conn {
	ctx, cancel := context.WithCancel(ctx)
	p := &pipe{ctx: metadata.NewIncomingContext(ctx, md), cancel: cancel,
		up: make(chan *rlqspb.RateLimitQuotaUsageReports), down: make(chan *rlqspb.RateLimitQuotaResponse),
		upClosed: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		p.err = h(p)
		if p.err == nil {
			p.err = io.EOF
		}
		close(p.ended)
		cancel()
	}()
	return &pipeClient{p}
}

type pipe struct {
	ctx       context.Context
	cancel    context.CancelFunc
	up        chan *rlqspb.RateLimitQuotaUsageReports
	down      chan *rlqspb.RateLimitQuotaResponse
	upClosed  chan struct{}
	closeOnce sync.Once
	ended     chan struct{}
	err       error // the handler's, once ended is closed
}

// The server's side.

func (p *pipe) Context() context.Context     { return p.ctx }
func (p *pipe) SetHeader(metadata.MD) error  { return nil }
func (p *pipe) SendHeader(metadata.MD) error { return nil }
func (p *pipe) SetTrailer(metadata.MD)       {}
func (p *pipe) SendMsg(any) error            { panic("rlqstest: SendMsg is not used") }
func (p *pipe) RecvMsg(any) error            { panic("rlqstest: RecvMsg is not used") }

func (p *pipe) Send(m *rlqspb.RateLimitQuotaResponse) error {
	select {
	case p.down <- m:
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

func (p *pipe) Recv() (*rlqspb.RateLimitQuotaUsageReports, error) {
	select {
	case m := <-p.up:
		return m, nil
	case <-p.upClosed:
		return nil, io.EOF
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
}

// pipeClient is the client's side.
type pipeClient struct{ p *pipe }

func (c *pipeClient) Send(m *rlqspb.RateLimitQuotaUsageReports) error {
	select {
	case c.p.up <- m:
		return nil
	case <-c.p.ended:
		return io.EOF
	case <-c.p.ctx.Done():
		return c.p.ctx.Err()
	}
}

func (c *pipeClient) Recv() (*rlqspb.RateLimitQuotaResponse, error) {
	select {
	case m := <-c.p.down:
		return m, nil
	case <-c.p.ended:
		return nil, c.p.err
	}
}

func (c *pipeClient) CloseSend() error {
	c.p.closeOnce.Do(func() { close(c.p.upClosed) })
	return nil
}
