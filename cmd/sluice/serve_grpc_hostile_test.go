package main

import (
	"bytes"
	"encoding/binary"
	"net"
	"regexp"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A gRPC call whose request message stalls half sent is ended by
// -grpc-request-timeout, and the part received is let go: gRPC itself
// has no such bound (the idle timeout counts connections without calls,
// and the connection age is 24 hours), so 128 such calls per connection,
// each with nearly 1 MiB sent once, held their memory for a day. Before,
// the call below got no answer at all.
func TestServeEndsAStalledGRPCRequest(t *testing.T) {
	re := regexp.MustCompile(`gRPC  (\S+)`)
	var addr string
	startCmd(t, runServe, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-grpc-request-timeout", "300ms"}, func(out string) bool {
		if m := re.FindStringSubmatch(out); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
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
		{":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
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
