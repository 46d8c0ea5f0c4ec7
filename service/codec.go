package service

import (
	"fmt"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec rlsCodec falls back on
	"google.golang.org/grpc/mem"
)

// vtMarshaler is what protoc-gen-go-vtproto generates for a message: its
// encoded size, and its encoding written backwards into a buffer of exactly
// that size, without reflection. go-control-plane ships this code for the
// rate limit service's messages (RateLimitResponse and the messages it
// holds) behind the build tag vtprotobuf; a binary built without the tag
// has no message that implements it, and rlsCodec then encodes with gRPC's
// proto codec.
type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVTStrict(dst []byte) (int, error)
}

// rlsCodec is the codec of the gRPC server of GRPCServerOptions, set on that
// server alone (grpc.ForceServerCodecV2), never registered for the process:
// it encodes a message that implements vtMarshaler with its generated code,
// decodes a RateLimitRequest of the shape Envoy sends itself
// (decodeRequest), and leaves every other message to gRPC's proto codec.
// Both produce the same wire format, so clients cannot tell them apart.
type rlsCodec struct{ fallback encoding.CodecV2 }

// newRLSCodec returns an rlsCodec over the proto codec registered by
// grpc/encoding/proto.
func newRLSCodec() rlsCodec { return rlsCodec{fallback: encoding.GetCodecV2("proto")} }

// Marshal encodes v, with its generated code when it has some.
func (c rlsCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMarshaler)
	if !ok {
		return c.fallback.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVTStrict(buf); err != nil {
			return nil, fmt.Errorf("marshal %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVTStrict((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, fmt.Errorf("marshal %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes data into v: a RateLimitRequest of Envoy's shape in one
// buffer with decodeRequest, anything else with gRPC's proto codec
// (go-control-plane generates no decoding code for these messages).
func (c rlsCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if req, ok := v.(*pb.RateLimitRequest); ok && len(data) == 1 {
		req.Reset()
		if decodeRequest(data[0].ReadOnlyData(), req) {
			return nil
		}
	}
	return c.fallback.Unmarshal(data, v)
}

// Name is the content subtype of the proto codec, "proto", which rlsCodec
// speaks.
func (c rlsCodec) Name() string { return "proto" }
