package daemon

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/tap"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/envflag"
)

// ListenerOptions are the timeouts and connection caps of serve's two
// listeners (see docs/serve.md, "Listeners"). Each is a flag whose default
// comes from an environment variable. The zero value has every timeout
// zero, which Check refuses: set them with Flags.
type ListenerOptions struct {
	// HTTP: NGINX's client_header_timeout, client_body_timeout,
	// send_timeout and keepalive_timeout, as net/http has them.
	readHeader, read, write, idle time.Duration
	// gRPC: how long a connection without calls is kept, how long its
	// handshake may take, its age limit and the grace after it, and how
	// often a client may ping.
	grpcIdle, grpcHandshake, grpcAge, grpcAgeGrace, grpcPingMin time.Duration
	// grpcRequest bounds a gRPC call from its headers to its answer,
	// the reading of its request message included.
	grpcRequest time.Duration
	// Connections per listener at most; 0: a share of the open-file limit
	// (see defaultMaxConns), negative: no cap.
	HTTPMaxConns, GRPCMaxConns int
	// tls is the gRPC listener's TLS (grpctls.go; zero: plaintext), uds
	// the Unix socket it listens on instead of TCP (GRPC_UDS; "": TCP),
	// and debugAddr the debug listener's address (debug.go; "": none).
	TLS       GRPCTLSOptions
	UDS       string
	DebugAddr string
}

// Flags defines the listener flags on fs, their defaults from the
// environment (malformed values go to errs).
func (o *ListenerOptions) Flags(fs *flag.FlagSet, errs *envflag.Errs) {
	fs.DurationVar(&o.readHeader, "http-read-header-timeout", errs.Duration("HTTP_READ_HEADER_TIMEOUT", 10*time.Second),
		"HTTP: time to read a request's headers (NGINX client_header_timeout)")
	fs.DurationVar(&o.read, "http-read-timeout", errs.Duration("HTTP_READ_TIMEOUT", 30*time.Second),
		"HTTP: time to read a whole request, body included (NGINX client_body_timeout)")
	fs.DurationVar(&o.write, "http-write-timeout", errs.Duration("HTTP_WRITE_TIMEOUT", 30*time.Second),
		"HTTP: time from the end of the request's headers to the end of the response (NGINX send_timeout)")
	fs.DurationVar(&o.idle, "http-idle-timeout", errs.Duration("HTTP_IDLE_TIMEOUT", 75*time.Second),
		"HTTP: how long an idle keep-alive connection is kept (NGINX keepalive_timeout)")
	fs.IntVar(&o.HTTPMaxConns, "http-max-conns", errs.Int("HTTP_MAX_CONNECTIONS", 0),
		"HTTP: open connections at most: at the cap the one idle longest gives way to a new one, else it waits; 0: 40% of the open-file limit, negative: no cap")
	fs.DurationVar(&o.grpcIdle, "grpc-idle-timeout", errs.Duration("GRPC_MAX_CONNECTION_IDLE", 3*time.Minute),
		"gRPC: a connection without calls for this long is closed with GOAWAY (NGINX http2_idle_timeout)")
	fs.DurationVar(&o.grpcHandshake, "grpc-handshake-timeout", errs.Duration("GRPC_CONNECTION_TIMEOUT", 10*time.Second),
		"gRPC: time for a new connection's HTTP/2 handshake")
	fs.DurationVar(&o.grpcAge, "grpc-max-connection-age", errs.Duration("GRPC_MAX_CONNECTION_AGE", 24*time.Hour),
		"gRPC: a connection this old is closed with GOAWAY, so that clients spread over new servers")
	fs.DurationVar(&o.grpcAgeGrace, "grpc-max-connection-age-grace", errs.Duration("GRPC_MAX_CONNECTION_AGE_GRACE", time.Hour),
		"gRPC: after -grpc-max-connection-age, time for the calls in flight before the connection is cut")
	fs.DurationVar(&o.grpcPingMin, "grpc-min-ping-interval", errs.Duration("GRPC_MIN_PING_INTERVAL", 10*time.Second),
		"gRPC: a client that sends keepalive pings more often than this is disconnected (too_many_pings)")
	fs.DurationVar(&o.grpcRequest, "grpc-request-timeout", errs.Duration("GRPC_REQUEST_TIMEOUT", 30*time.Second),
		"gRPC: time from a call's headers to its answer, the request message included (a stalled message is let go)")
	fs.IntVar(&o.GRPCMaxConns, "grpc-max-conns", errs.Int("GRPC_MAX_CONNECTIONS", 0),
		"gRPC: open connections at most, more wait to be accepted; 0: 40% of the open-file limit, negative: no cap")
	o.TLS.flags(fs, errs)
	fs.StringVar(&o.UDS, "grpc-uds", os.Getenv("GRPC_UDS"),
		"gRPC: listen on this Unix socket instead of -grpc-addr (a stale socket file is replaced; the socket is removed on stop)")
	fs.StringVar(&o.DebugAddr, "debug-addr", debugAddrFromEnv(),
		"the debug listener (/rlconfig, pprof): host:port; default off, or DEBUG_HOST:DEBUG_PORT when either is set (DEBUG_HOST 127.0.0.1, DEBUG_PORT 6070 unset)")
}

// Check refuses settings that would disable a bound by accident (every
// timeout must be positive) and gRPC TLS settings that do not go together
// (see GRPCTLSOptions.check).
func (o *ListenerOptions) Check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"-http-read-header-timeout", o.readHeader}, {"-http-read-timeout", o.read},
		{"-http-write-timeout", o.write}, {"-http-idle-timeout", o.idle},
		{"-grpc-idle-timeout", o.grpcIdle}, {"-grpc-handshake-timeout", o.grpcHandshake},
		{"-grpc-max-connection-age", o.grpcAge}, {"-grpc-max-connection-age-grace", o.grpcAgeGrace},
		{"-grpc-min-ping-interval", o.grpcPingMin}, {"-grpc-request-timeout", o.grpcRequest},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", d.name, d.v)
		}
	}
	return o.TLS.check()
}

// NotActedOn returns the listener flags that the others make moot, which
// serve names in its start-up line: the TLS pair without -grpc-tls (see
// GRPCTLSOptions.notActedOn), and with -grpc-uds, -grpc-addr when it (or
// GRPC_HOST or GRPC_PORT) was set, since gRPC then listens on the socket
// only.
func (o *ListenerOptions) NotActedOn(fs *flag.FlagSet) []string {
	out := o.TLS.notActedOn()
	if o.UDS == "" {
		return out
	}
	if os.Getenv("GRPC_HOST") != "" || os.Getenv("GRPC_PORT") != "" || envflag.IsSet(fs, "grpc-addr") {
		out = append(out, "-grpc-addr")
	}
	return out
}

// HTTPServer returns the HTTP server of serve for h with the timeouts of
// o, its errors logged on errorLog (nil: the standard logger). It is the
// proxy's server (gateway.Timeouts.Server, the one place where both
// commands' HTTP servers are made) with serve's header and idle
// timeouts, and bounds on the whole request and response too, since
// nothing serve answers streams.
func (o *ListenerOptions) HTTPServer(h http.Handler, errorLog *slog.Logger) *http.Server {
	hs := gateway.Timeouts{ClientHeader: o.readHeader, Keepalive: o.idle}.Server(h, errorLog)
	hs.ReadTimeout, hs.WriteTimeout = o.read, o.write
	return hs
}

// GRPCOptions returns the server options that bound gRPC connections and
// calls: handshake time, idle and age limits, the least ping interval, and
// the time of one call (see callDeadline).
func (o *ListenerOptions) GRPCOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(callDeadline(o.grpcRequest)),
		grpc.ChainStreamInterceptor(watchRequestDeadline), // chained: other options may add their own
		grpc.ConnectionTimeout(o.grpcHandshake),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     o.grpcIdle,
			MaxConnectionAge:      o.grpcAge,
			MaxConnectionAgeGrace: o.grpcAgeGrace,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             o.grpcPingMin,
			PermitWithoutStream: true,
		}),
	}
}

// callDeadline returns a tap handle that gives each gRPC call at most d
// from its headers: gRPC reads a unary call's request message before any
// interceptor or handler runs, under the stream's context only, so without
// it a message that stalls half sent holds its buffer until the connection
// ends (the idle timeout counts connections without calls). A call whose
// caller sent a grpc-timeout of at most d (Envoy sends its rate limit
// filter's timeout, 20 ms by default) already has its deadline and costs
// nothing more; only calls without one get a timer, which is stopped when
// the call ends (gRPC then cancels the stream's context, this one's
// parent). An RLQS stream gets none: it is meant to stay open, and RLQS
// ends it after -rlqs-idle-timeout without a message, a message that
// stalls half sent included.
func callDeadline(d time.Duration) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if info.FullMethodName == rlqsStream {
			return ctx, nil
		}
		if info.FullMethodName == HealthWatch {
			// The stream stays open as long as its watcher: only the
			// reading of its request is bounded (see watchRequestDeadline).
			ctx, cancel := context.WithCancel(ctx)
			return context.WithValue(ctx, requestTimerKey{}, time.AfterFunc(d, cancel)), nil
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
			return ctx, nil
		}
		ctx, cancel := context.WithTimeout(ctx, d)
		_ = cancel // called by the parent's cancellation, at the call's end
		return ctx, nil
	}
}

// HealthWatch is the gRPC health service's streaming method: its stream
// is meant to stay open, so callDeadline bounds only the reading of its
// request message, with a timer that watchRequestDeadline stops once the
// message is in.
const HealthWatch = "/grpc.health.v1.Health/Watch"

// rlqsStream is RLQS's streaming method, exempt from callDeadline.
const rlqsStream = rlqspb.RateLimitQuotaService_StreamRateLimitQuotas_FullMethodName

// requestTimerKey is the context key of a Watch call's request timer.
type requestTimerKey struct{}

// watchRequestDeadline is the stream interceptor that stops a Watch call's
// request timer (see callDeadline) when its request message has been
// read, so that the stream then lasts as long as its watcher.
func watchRequestDeadline(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if t, ok := ss.Context().Value(requestTimerKey{}).(*time.Timer); ok {
		ss = &stopOnRecv{ServerStream: ss, t: t}
	}
	return handler(srv, ss)
}

// stopOnRecv stops t once a message has been received.
type stopOnRecv struct {
	grpc.ServerStream
	t *time.Timer
}

// RecvMsg receives m and stops the timer once one has arrived.
func (s *stopOnRecv) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.t.Stop()
	}
	return err
}
