package service

import (
	"unicode/utf8"
	"unsafe"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// The server's codec decodes a RateLimitRequest of the shape Envoy sends
// (a domain, descriptors of key/value entries, hits_addend, a descriptor's
// is_negative_hits) without reflection and in few allocations: its
// descriptors and entries in one block each (one in all for one descriptor
// of one entry), its strings in one more. Anything else, an unknown or
// malformed field, a descriptor's limit override or hits_addend, invalid
// UTF-8, is left to the proto library, which then decodes the whole
// message, so both decode every input alike. The work is two passes over
// the request's bytes.
//
// The two passes spell out their own loops over each message's fields
// (scanRequest and fill, scanDescriptor and fillDescriptor, scanEntry and
// fillEntry) although the loops look alike: one walker shared by both,
// calling back per field, measured 5-17% more instructions per decode
// (bench/callgrind.sh), on every request the server answers.

// maxSharedStrings is the most string bytes of one request kept in one
// allocation. Past it each string gets its own, so that a string the
// service keeps (an entry's value in a heavy-hitter sketch, say) never
// holds on to much more than itself.
const maxSharedStrings = 256

// requestShape is what the first pass finds: the number of descriptors and
// entries, and the bytes of their strings and the domain.
type requestShape struct{ descs, entries, strBytes int }

// oneEntryRequest is the descriptors of a request of one descriptor of one
// entry, the common case, in one allocation.
type oneEntryRequest struct {
	dp [1]*rlpb.RateLimitDescriptor
	d  rlpb.RateLimitDescriptor
	ep [1]*rlpb.RateLimitDescriptor_Entry
	e  rlpb.RateLimitDescriptor_Entry
}

// decodeRequest decodes b into req, which must be new, and reports true;
// or reports false, having set nothing, when b is not of the shape it
// decodes.
func decodeRequest(b []byte, req *pb.RateLimitRequest) bool {
	var sh requestShape
	if !scanRequest(b, &sh) {
		return false
	}
	d := requestDecoder{}
	if sh.strBytes <= maxSharedStrings {
		d.strs = make([]byte, 0, sh.strBytes)
	}
	if sh.descs == 1 && sh.entries == 1 {
		one := new(oneEntryRequest)
		one.dp[0], one.ep[0] = &one.d, &one.e
		d.descs, d.dptrs = unsafe.Slice(&one.d, 1), one.dp[:]
		d.ents, d.eptrs = unsafe.Slice(&one.e, 1), one.ep[:]
	} else if sh.descs > 0 {
		d.descs, d.dptrs = make([]rlpb.RateLimitDescriptor, sh.descs), make([]*rlpb.RateLimitDescriptor, sh.descs)
		if sh.entries > 0 {
			d.ents, d.eptrs = make([]rlpb.RateLimitDescriptor_Entry, sh.entries), make([]*rlpb.RateLimitDescriptor_Entry, sh.entries)
		}
	}
	d.fill(b, req)
	return true
}

// scanRequest checks that b is a RateLimitRequest of the shape
// decodeRequest decodes, and counts into sh.
func scanRequest(b []byte, sh *requestShape) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // domain
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return false
			}
			sh.strBytes += len(v)
			b = b[n:]
		case num == 2 && typ == protowire.BytesType: // descriptors
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !scanDescriptor(v, sh) {
				return false
			}
			sh.descs++
			b = b[n:]
		case num == 3 && typ == protowire.VarintType: // hits_addend
			_, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// scanDescriptor checks one RateLimitDescriptor: entries and
// is_negative_hits only.
func scanDescriptor(b []byte, sh *requestShape) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // entries
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !scanEntry(v, sh) {
				return false
			}
			sh.entries++
			b = b[n:]
		case num == 4 && typ == protowire.VarintType: // is_negative_hits
			_, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// scanEntry checks one entry: a key and a value, valid UTF-8.
func scanEntry(b []byte, sh *requestShape) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || (num != 1 && num != 2) || typ != protowire.BytesType {
			return false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 || !utf8.Valid(v) {
			return false
		}
		sh.strBytes += len(v)
		b = b[n:]
	}
	return true
}

// requestDecoder is the second pass: the memory the first pass sized, taken
// in order.
type requestDecoder struct {
	strs  []byte // nil: each string allocated on its own
	descs []rlpb.RateLimitDescriptor
	dptrs []*rlpb.RateLimitDescriptor
	ents  []rlpb.RateLimitDescriptor_Entry
	eptrs []*rlpb.RateLimitDescriptor_Entry
	nd    int
	ne    int
}

// str returns v as a string: a part of d.strs, which is never written
// again where it holds a string, or a string of its own.
func (d *requestDecoder) str(v []byte) string {
	if d.strs == nil {
		return string(v)
	}
	if len(v) == 0 {
		return ""
	}
	start := len(d.strs)
	d.strs = append(d.strs, v...) // within its capacity: never moves
	return unsafe.String(&d.strs[start], len(v))
}

// fill decodes b, which scanRequest accepted, into req. A field given more
// than once keeps its last value, as in the proto library.
func (d *requestDecoder) fill(b []byte, req *pb.RateLimitRequest) {
	if len(d.dptrs) > 0 {
		req.Descriptors = d.dptrs[:0:len(d.dptrs)]
	}
	for len(b) > 0 {
		num, _, n := protowire.ConsumeTag(b)
		b = b[n:]
		switch num {
		case 1:
			v, n := protowire.ConsumeBytes(b)
			req.Domain = d.str(v)
			b = b[n:]
		case 2:
			v, n := protowire.ConsumeBytes(b)
			desc := &d.descs[d.nd]
			d.fillDescriptor(v, desc)
			d.dptrs[d.nd] = desc
			d.nd++
			req.Descriptors = req.Descriptors[:d.nd]
			b = b[n:]
		case 3:
			x, n := protowire.ConsumeVarint(b)
			req.HitsAddend = uint32(x)
			b = b[n:]
		}
	}
}

// fillDescriptor decodes one descriptor that scanDescriptor accepted.
func (d *requestDecoder) fillDescriptor(b []byte, desc *rlpb.RateLimitDescriptor) {
	first := d.ne
	for len(b) > 0 {
		num, _, n := protowire.ConsumeTag(b)
		b = b[n:]
		switch num {
		case 1:
			v, n := protowire.ConsumeBytes(b)
			e := &d.ents[d.ne]
			d.fillEntry(v, e)
			d.eptrs[d.ne] = e
			d.ne++
			b = b[n:]
		case 4:
			x, n := protowire.ConsumeVarint(b)
			desc.IsNegativeHits = x != 0
			b = b[n:]
		}
	}
	if d.ne > first {
		desc.Entries = d.eptrs[first:d.ne:d.ne]
	}
}

// fillEntry decodes one entry that scanEntry accepted.
func (d *requestDecoder) fillEntry(b []byte, e *rlpb.RateLimitDescriptor_Entry) {
	for len(b) > 0 {
		num, _, n := protowire.ConsumeTag(b)
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if num == 1 {
			e.Key = d.str(v)
		} else {
			e.Value = d.str(v)
		}
		b = b[n:]
	}
}
