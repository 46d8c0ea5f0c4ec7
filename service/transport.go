package service

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/bodyrate"
)

// MaxJSONBody is the largest request body POST /json reads: 1 MiB.
const MaxJSONBody = 1 << 20

// MaxRequestBytes is the largest gRPC request message the server of
// GRPCServerOptions accepts (ResourceExhausted past it): 1 MiB, as
// MaxJSONBody, instead of gRPC's default of 4 MiB.
const MaxRequestBytes = MaxJSONBody

// grpcServer adapts a Service to pb.RateLimitServiceServer.
type grpcServer struct {
	pb.UnimplementedRateLimitServiceServer
	s *Service
}

func (g grpcServer) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	return g.s.ShouldRateLimit(ctx, req)
}

// RegisterGRPC registers the Service on r (a *grpc.Server) as
// envoy.service.ratelimit.v3.RateLimitService, and the standard gRPC
// health service (grpc.health.v1.Health), which reports SERVING for "",
// HealthServiceName and LegacyHealthServiceName until SetServing(false);
// its Check also reports NOT_SERVING while Config.Healthy reports false.
func (s *Service) RegisterGRPC(r grpc.ServiceRegistrar) {
	pb.RegisterRateLimitServiceServer(r, grpcServer{s: s})
	healthpb.RegisterHealthServer(r, healthServer{s.health, s})
}

// Handler returns the HTTP face of the Service:
//
//   - POST /json: a RateLimitRequest in protojson in, the RateLimitResponse
//     in protojson out, with status 200 when OK and 429 when OVER_LIMIT, and
//     response_headers_to_add also set as HTTP headers. A body that is not
//     a valid request is answered 400 with a one-line message, a body over
//     MaxJSONBody 413, a store failure 503, and a body that would take the
//     bodies being read past Config.MaxJSONBytesInFlight, or its peer's
//     past Config.MaxJSONBytesPerPeer, 503 with Retry-After, and a body
//     that stalls or arrives below Config.JSONBodyMinRate 408.
//   - GET /healthcheck: 200 "OK", or 503 after SetServing(false) or while
//     Config.Healthy reports false.
//   - GET /metrics: the Prometheus metrics, when Config.Registerer is a
//     prometheus.Gatherer.
//   - /auth (ForwardAuthPath), any method, when Config.ForwardAuth
//     is set: the forward-auth endpoint for Traefik's forwardAuth, Caddy's
//     forward_auth and NGINX's auth_request (see the package
//     documentation).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /json", s.serveJSON)
	mux.HandleFunc("GET /healthcheck", s.serveHealth)
	if s.auth != nil {
		mux.HandleFunc(ForwardAuthPath, s.serveAuth) // any method: proxies differ
	}
	if s.gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

func (s *Service) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !s.healthy() {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "NOT SERVING\n")
		return
	}
	io.WriteString(w, "OK")
}

// errJSONBusy is readJSONBody's error when the bodies being read would
// hold more than Config.MaxJSONBytesInFlight, and errJSONPeerBusy when
// those of the request's peer would hold more than its share
// (Config.MaxJSONBytesPerPeer).
var (
	errJSONBusy     = errors.New("service: too many request bytes being read at once; retry")
	errJSONPeerBusy = errors.New("service: this client's request bodies being read hold its share of the bytes being read at once; retry")
)

// errJSONSlow is readJSONBody's error when a read of the body passed its
// deadline: the body stalled, fell below the minimum rate, or took longer
// than the server's read timeout.
var errJSONSlow = errors.New("service: the request body arrived too slowly")

// readJSONBody reads r's body, at most MaxJSONBody bytes, counting each
// byte read against the bodies in flight, all together and peer's
// (Config.MaxJSONBytesInFlight and MaxJSONBytesPerPeer): it returns
// errJSONBusy or errJSONPeerBusy rather than go past them. held is what
// the body counts for, given back by the caller when the request ends,
// error or not. A body is counted as its bytes arrive, not by its
// Content-Length, so that a client must send what it holds. Each read has
// a deadline (bodyrate.Deadline: Config.JSONBodyTimeout, JSONBodyMinRate),
// never later than the server's ReadTimeout from when the handler began;
// past it readJSONBody returns errJSONSlow.
func (s *Service) readJSONBody(w http.ResponseWriter, r *http.Request, peer netip.Addr) (body []byte, held int64, err error) {
	if r.ContentLength > MaxJSONBody {
		return nil, 0, &http.MaxBytesError{Limit: MaxJSONBody}
	}
	rc := http.NewResponseController(w)
	start := time.Now()
	var whole time.Time // zero: no ReadTimeout to keep
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ReadTimeout > 0 {
		whole = start.Add(srv.ReadTimeout)
	}
	timed := true // false once the writer turns out to have no deadlines
	rd := http.MaxBytesReader(w, r.Body, MaxJSONBody)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // room to read into, as io.ReadAll grows
		}
		if timed {
			dl := bodyrate.Deadline(start, time.Now(), s.jsonTimeout, held, s.jsonMinRate)
			if !whole.IsZero() && whole.Before(dl) {
				dl = whole
			}
			timed = rc.SetReadDeadline(dl) == nil
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			if err := s.jsonBytes.take(peer, int64(n)); err != nil {
				return nil, held, err
			}
			held += int64(n)
			buf = buf[:len(buf)+n]
		}
		if err == io.EOF {
			if timed {
				rc.SetReadDeadline(time.Time{}) // for the server's own read that notices a client leaving
			}
			return buf, held, nil
		}
		// On an error the deadline stays: the server reads no more of
		// this connection, which it closes.
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, held, errJSONSlow
		}
		if err != nil {
			return nil, held, err
		}
	}
}

func (s *Service) serveJSON(w http.ResponseWriter, r *http.Request) {
	peer := jsonPeer(r)
	body, held, err := s.readJSONBody(w, r, peer)
	defer s.jsonBytes.give(peer, held)
	if err != nil {
		s.jsonBodyError(w, err)
		return
	}
	var req pb.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		http.Error(w, "service: the body is not a JSON RateLimitRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := s.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		http.Error(w, status.Convert(err).Message(), httpStatus(status.Code(err)))
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		http.Error(w, "service: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	for _, hv := range resp.GetResponseHeadersToAdd() {
		h.Add(hv.GetKey(), hv.GetValue())
	}
	h.Set("Content-Type", "application/json")
	code := http.StatusOK
	if resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT {
		code = http.StatusTooManyRequests
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(code)
	w.Write(out)
}

// jsonBodyError answers a POST /json whose body could not be read.
func (s *Service) jsonBodyError(w http.ResponseWriter, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errJSONBusy), errors.Is(err, errJSONPeerBusy):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, errJSONSlow):
		w.Header().Set("Connection", "close") // the rest of the body is not read
		// The server's write timeout may end with its read timeout,
		// which may be what cut the body: a second to say so.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Second))
		msg := err.Error() + ": it stalled for " + s.jsonTimeout.String()
		if s.jsonMinRate > 0 {
			msg += ", arrived at under " + strconv.FormatInt(s.jsonMinRate, 10) + " bytes/s"
		}
		http.Error(w, msg+" or took longer than the read timeout", http.StatusRequestTimeout)
	case errors.As(err, &tooBig):
		http.Error(w, "service: request body exceeds "+strconv.Itoa(MaxJSONBody)+" bytes", http.StatusRequestEntityTooLarge)
	default:
		http.Error(w, "service: reading the request body: "+err.Error(), http.StatusBadRequest)
	}
}

// httpStatus maps the gRPC code of a ShouldRateLimit error to an HTTP
// status.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unavailable, codes.Canceled:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}
