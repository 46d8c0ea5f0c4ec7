package service

import (
	"strings"
	"testing"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// codecResponses are responses of every shape the service builds: empty,
// one status, several with limits, durations, headers, dynamic metadata
// and a quota, and one large enough for gRPC's pooled buffers.
func codecResponses(t *testing.T) []*pb.RateLimitResponse {
	meta, err := structpb.NewStruct(map[string]any{"rule": "api.user", "n": 3.0, "tags": []any{"a", true}})
	if err != nil {
		t.Fatal(err)
	}
	status := func(code pb.RateLimitResponse_Code, rpu uint32) *pb.RateLimitResponse_DescriptorStatus {
		return &pb.RateLimitResponse_DescriptorStatus{
			Code:               code,
			CurrentLimit:       &pb.RateLimitResponse_RateLimit{Name: "per-user", RequestsPerUnit: rpu, Unit: pb.RateLimitResponse_RateLimit_MINUTE},
			LimitRemaining:     rpu / 2,
			DurationUntilReset: durationpb.New(1500e6),
		}
	}
	big := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK}
	for i := range 64 {
		big.Statuses = append(big.Statuses, status(pb.RateLimitResponse_OK, uint32(i)))
		big.ResponseHeadersToAdd = append(big.ResponseHeadersToAdd, &corepb.HeaderValue{Key: "X-Pad", Value: strings.Repeat("v", 20)})
	}
	return []*pb.RateLimitResponse{
		{},
		{OverallCode: pb.RateLimitResponse_OK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{{Code: pb.RateLimitResponse_OK}}},
		{
			OverallCode: pb.RateLimitResponse_OVER_LIMIT,
			Statuses:    []*pb.RateLimitResponse_DescriptorStatus{status(pb.RateLimitResponse_OK, 10), status(pb.RateLimitResponse_OVER_LIMIT, 0)},
			ResponseHeadersToAdd: []*corepb.HeaderValue{
				{Key: "RateLimit-Policy", Value: `"per-user";q=10;w=60`},
				{Key: "Retry-After", Value: "2"},
			},
			RequestHeadersToAdd: []*corepb.HeaderValue{{Key: "x-over", Value: "1"}},
			DynamicMetadata:     meta,
			Quota:               &pb.RateLimitResponse_Quota{Requests: 7, ExpirationSpecifier: &pb.RateLimitResponse_Quota_ValidUntil{ValidUntil: timestamppb.New(time.Unix(1700000000, 5))}, Id: "q"},
			RawBody:             []byte("too many"),
		},
		big,
	}
}

// The codec of the server encodes every response so that the proto library
// decodes it to an equal message, by the same bytes as the proto library
// (but for the order of a map's entries), with or without go-control-plane's generated code (build tag
// vtprotobuf).
func TestRLSCodecEncodesAsProto(t *testing.T) {
	c := newRLSCodec()
	_, vt := any(&pb.RateLimitResponse{}).(vtMarshaler)
	t.Logf("generated marshalling compiled in: %v", vt)
	for i, resp := range codecResponses(t) {
		data, err := c.Marshal(resp)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		got := data.Materialize()
		data.Free()
		var back pb.RateLimitResponse
		if err := proto.Unmarshal(got, &back); err != nil {
			t.Fatalf("response %d: decoding: %v", i, err)
		}
		if !proto.Equal(&back, resp) {
			t.Errorf("response %d decodes to\n%v\nwant\n%v", i, &back, resp)
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		// A map's entries may come in any order, as in proto's encoding.
		if resp.DynamicMetadata == nil && string(got) != string(want) {
			t.Errorf("response %d encodes as\n%x\nproto encodes\n%x", i, got, want)
		}
	}
}

// Requests are decoded as gRPC's proto codec decodes them, and a message
// without generated code is encoded by that codec.
func TestRLSCodecFallsBackToProto(t *testing.T) {
	c := newRLSCodec()
	req := &pb.RateLimitRequest{Domain: "api", HitsAddend: 3, Descriptors: []*rlpb.RateLimitDescriptor{{
		Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: "bob"}},
	}}}
	wire, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var got pb.RateLimitRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, req) {
		t.Errorf("decoded %v, want %v", &got, req)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, &got); err == nil {
		t.Error("a malformed request decoded without error")
	}
	plain := structpb.NewStringValue("not an RLS message") // no generated code in any build
	data, err := c.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	want, err := encoding.GetCodecV2("proto").Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if string(data.Materialize()) != string(want.Materialize()) {
		t.Errorf("fallback encoded %x, proto codec %x", data.Materialize(), want.Materialize())
	}
	if _, err := c.Marshal("not a message"); err == nil {
		t.Error("a non-message was encoded without error")
	}
}

// decodeCases are requests of the shapes Envoy sends and of shapes the
// fast decoder leaves to the proto library.
func decodeCases() []*pb.RateLimitRequest {
	e := func(k, v string) *rlpb.RateLimitDescriptor_Entry {
		return &rlpb.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	long := strings.Repeat("é", 200) // past maxSharedStrings: strings of their own
	return []*pb.RateLimitRequest{
		{},
		{Domain: "api"},
		{Domain: "api", HitsAddend: 7, Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{e("user", "bob")}}}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{
			{Entries: []*rlpb.RateLimitDescriptor_Entry{e("a", "1"), e("b", "")}},
			{},
			{Entries: []*rlpb.RateLimitDescriptor_Entry{e("", long), e("c", "3")}, IsNegativeHits: true},
		}},
		{Domain: long, Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{e(long, long)}}}},
		// Left to the proto library: an override and a descriptor's hits_addend.
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries: []*rlpb.RateLimitDescriptor_Entry{e("user", "bob")},
			Limit:   &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_MINUTE},
		}}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries: []*rlpb.RateLimitDescriptor_Entry{e("user", "bob")}, HitsAddend: wrapperspb.UInt64(4),
		}}},
	}
}

// The codec decodes every request as the proto library does, whether its
// own decoder takes it or not.
func TestRLSCodecDecodesRequestsAsProto(t *testing.T) {
	c := newRLSCodec()
	for i, req := range decodeCases() {
		wire, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var got pb.RateLimitRequest
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &got); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !proto.Equal(&got, req) {
			t.Errorf("request %d decoded as\n%v\nwant\n%v", i, &got, req)
		}
	}
}

// The fast decoder takes the requests Envoy sends, in two allocations for
// one descriptor of one entry.
func TestDecodeRequestTakesEnvoysShape(t *testing.T) {
	for i, req := range decodeCases()[:5] {
		wire, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if !decodeRequest(wire, new(pb.RateLimitRequest)) {
			t.Errorf("request %d left to the proto library", i)
		}
	}
	wire, err := proto.Marshal(decodeCases()[2])
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if !decodeRequest(wire, new(pb.RateLimitRequest)) {
			t.Fatal("not decoded")
		}
	})
	if allocs > 3 { // the request itself, its descriptors, its strings
		t.Errorf("%.1f allocations for one descriptor of one entry, want 3", allocs)
	}
}

// Whatever the bytes, the fast decoder either leaves them to the proto
// library or decodes them as it does; it never accepts what the library
// rejects.
func FuzzDecodeRequest(f *testing.F) {
	for _, req := range decodeCases() {
		wire, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire)
	}
	f.Add([]byte{0x0a, 0x02, 0xff, 0xfe})             // domain of invalid UTF-8
	f.Add([]byte{0x0a, 0x01, 'a', 0x0a, 0x01, 'b'})   // domain twice: the last
	f.Add([]byte{0x12, 0x04, 0x0a, 0x02, 0x08, 0x01}) // an entry with a varint
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast pb.RateLimitRequest
		if !decodeRequest(b, &fast) {
			return
		}
		var want pb.RateLimitRequest
		if err := proto.Unmarshal(b, &want); err != nil {
			t.Fatalf("decoded %x, which the proto library rejects: %v", b, err)
		}
		if !proto.Equal(&fast, &want) {
			t.Fatalf("%x decoded as\n%v\nthe proto library:\n%v", b, &fast, &want)
		}
	})
}
