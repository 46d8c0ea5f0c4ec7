package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/daemon"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A gRPC call whose request message stalls half sent is ended by
// -grpc-request-timeout, and the part received is let go: gRPC itself
// has no such bound (the idle timeout counts connections without calls,
// and the connection age is 24 hours), so 128 such calls per connection,
// each with nearly 1 MiB sent once, held their memory for a day. Before,
// the call below got no answer at all.
func TestServeEndsAStalledGRPCRequest(t *testing.T) {
	addr := serveGRPCWithRequestTimeout(t, "300ms")
	for _, method := range []string{"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", daemon.HealthWatch} {
		t.Run(method, func(t *testing.T) { stallRequest(t, addr, method) })
	}
}

// A health Watch stream, once its request is read, lasts as long as its
// watcher: -grpc-request-timeout bounds only the reading of the request.
func TestServeKeepsAHealthWatchOpen(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	addr := serveGRPCWithRequestTimeout(t, "300ms")
	conn := dial(t, addr, insecure.NewCredentials())
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Watch answer: %v %v", r, err)
	}
	got := make(chan error, 1)
	go func() { _, err := w.Recv(); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("the Watch stream ended after its request was read: %v", err)
	case <-time.After(time.Second): // three request timeouts
	}
}

// serveGRPCWithRequestTimeout starts serve with -grpc-request-timeout d
// and returns its gRPC address.
func serveGRPCWithRequestTimeout(t *testing.T, d string) string {
	t.Helper()
	return launch(t, "-grpc-request-timeout", d).grpc
}

// stallRequest opens a call of method at addr whose request message
// stops after 10 of its 1,000 bytes, and waits up to 5 s for the server
// to end it.
func stallRequest(t *testing.T, addr, method string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "sluice"},
		{":path", method},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	// A message of 1,000 bytes announced, 10 sent, and then nothing.
	msg := make([]byte, 5+10)
	binary.BigEndian.PutUint32(msg[1:5], 1000)
	fr.WriteData(1, false, msg)

	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no end of the stalled call within 5s: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				return // the call's status, as trailers
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return
			}
		case *http2.GoAwayFrame:
			return
		}
	}
}
