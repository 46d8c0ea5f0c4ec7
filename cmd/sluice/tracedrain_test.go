package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/tracing/otlptest"
)

// The span of a gRPC call that finishes during the drain reaches the OTLP
// collector: the tracer provider is shut down (its last spans flushed)
// only after the gRPC server has stopped, its handlers included. The
// call's request message is held half sent across the stop and completed
// once the drain has begun (a health watcher has been told NOT_SERVING),
// so the call's span ends inside the drain.
func TestServeExportsTheSpanOfACallFinishedDuringTheDrain(t *testing.T) {
	r, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Setenv("TRACING_ENABLED", "true")
	t.Setenv("TRACING_EXPORTER_PROTOCOL", "http")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.HTTPURL)
	s := launchListening(t)

	conn := dial(t, s.grpc, insecure.NewCredentials())
	defer conn.Close()
	watch := watchHealth(t, conn, "")
	recvStatus(t, watch, healthpb.HealthCheckResponse_SERVING)
	msg, err := proto.Marshal(&pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{
		{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	frame = append(frame, msg...)
	call := startRawCall(t, s.grpc, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", frame[:7])
	// The drain may begin only once the server holds the call: else, on
	// a loaded machine, the stop closed the connection before serve had
	// read the call's headers (or accepted the connection at all).
	call.sync(t)

	s.cancel() // as SIGTERM does
	// The drain has begun once the watcher is told NOT_SERVING.
	recvStatus(t, watch, healthpb.HealthCheckResponse_NOT_SERVING)
	if err := call.fr.WriteData(1, true, frame[7:]); err != nil {
		t.Fatal(err)
	}
	if code := call.status(t); code != "0" {
		t.Fatalf("the call finished during the drain with grpc-status %q, want 0", code)
	}
	s.stop(t)

	wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer wcancel()
	for _, sp := range r.Wait(wctx, 1) {
		if sp.Span.GetName() == "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" {
			return
		}
	}
	t.Fatalf("no span of the call finished during the drain among %d: %s", len(r.Spans()), s.stderr.String())
}

// rawCall is a gRPC call made over HTTP/2 frames by hand (stream 1), so
// that its request message can be sent in parts.
type rawCall struct {
	c  net.Conn
	fr *http2.Framer
}

// startRawCall opens a connection to addr and starts a call of method on
// it, sending first (the start of the length-prefixed message) only.
func startRawCall(t *testing.T, addr, method string, first []byte) *rawCall {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "sluice"}, {":path", method},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	fr.WriteData(1, false, first)
	return &rawCall{c: c, fr: fr}
}

// sync sends a PING and reads the server's frames until its ACK,
// failing the test after 10 s. The server reads a connection's frames in
// order, so once it has answered the PING it has read the call's
// headers: the call is in flight.
func (rc *rawCall) sync(t *testing.T) {
	t.Helper()
	data := [8]byte{'i', 'n', 'f', 'l', 'i', 'g', 'h', 't'}
	if err := rc.fr.WritePing(false, data); err != nil {
		t.Fatal(err)
	}
	rc.readUntil(t, "no answer to the PING", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.PingFrame:
			return f.IsAck() && f.Data == data
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY before the call was in flight: %v", f.ErrCode)
		}
		return false
	})
}

// status reads the server's frames until the call's trailers and returns
// their grpc-status; the read fails the test after 10 s.
func (rc *rawCall) status(t *testing.T) string {
	t.Helper()
	code := ""
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == "grpc-status" {
			code = f.Value
		}
	})
	rc.readUntil(t, "no end of the call", func(f http2.Frame) bool {
		h, ok := f.(*http2.HeadersFrame)
		if !ok {
			return false
		}
		if _, err := dec.Write(h.HeaderBlockFragment()); err != nil {
			t.Fatal(err)
		}
		return h.StreamID == 1 && h.StreamEnded()
	})
	return code
}

// readUntil reads the server's frames, answering its settings and pings,
// until done reports true for one of the others; a reset of the call,
// or no such frame within 10 s (failing with what), fails the test.
func (rc *rawCall) readUntil(t *testing.T, what string, done func(http2.Frame) bool) {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer rc.c.SetReadDeadline(time.Time{})
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				rc.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				rc.fr.WritePing(true, f.Data)
			} else if done(f) {
				return
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("the call was reset: %v", f.ErrCode)
		default:
			if done(f) {
				return
			}
		}
	}
}
