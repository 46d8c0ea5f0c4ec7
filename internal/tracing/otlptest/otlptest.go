// Package otlptest is an OTLP trace receiver for tests: the collector's
// TraceService over gRPC and its POST /v1/traces over HTTP, on loopback
// ports, keeping every span it is sent.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package otlptest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// MaxBodyBytes bounds one HTTP export request the receiver reads.
const MaxBodyBytes = 16 << 20

// Span is one received span with its resource's service.name and its
// other string attributes.
type Span struct {
	Service  string
	Resource map[string]string
	Span     *tracepb.Span
}

// Receiver keeps the spans exported to it. Its zero value is not usable:
// make one with Start.
type Receiver struct {
	coltrace.UnimplementedTraceServiceServer

	// GRPCAddr and HTTPURL are where it listens: host:port for an OTLP
	// gRPC exporter, http://host:port for an OTLP HTTP exporter.
	GRPCAddr, HTTPURL string

	gs *grpc.Server
	hs *http.Server

	mu      sync.Mutex
	spans   []Span
	arrived chan struct{} // closed and replaced on each export
}

// Start listens on two loopback ports and serves until Close.
func Start() (*Receiver, error) {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		return nil, err
	}
	r := &Receiver{GRPCAddr: gl.Addr().String(), HTTPURL: "http://" + hl.Addr().String(), arrived: make(chan struct{})}
	r.gs = grpc.NewServer()
	coltrace.RegisterTraceServiceServer(r.gs, r)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	r.hs = &http.Server{Handler: mux}
	go r.gs.Serve(gl)
	go r.hs.Serve(hl)
	return r, nil
}

// Export implements the collector's TraceService.
func (r *Receiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(io.LimitReader(hr.Body, MaxBodyBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, fmt.Sprintf("not an OTLP protobuf export: %v", err), http.StatusBadRequest)
		return
	}
	r.add(&req)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (r *Receiver) add(req *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, a := range rs.GetResource().GetAttributes() {
			res[a.GetKey()] = a.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Service: res["service.name"], Resource: res, Span: s})
			}
		}
	}
	close(r.arrived)
	r.arrived = make(chan struct{})
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait returns the spans once at least n have arrived, or what arrived
// when ctx ends.
func (r *Receiver) Wait(ctx context.Context, n int) []Span {
	for {
		r.mu.Lock()
		spans, arrived := append([]Span(nil), r.spans...), r.arrived
		r.mu.Unlock()
		if len(spans) >= n {
			return spans
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return spans
		}
	}
}

// Close stops both listeners.
func (r *Receiver) Close() {
	r.gs.Stop()
	r.hs.Close()
}
