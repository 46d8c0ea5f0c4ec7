// Package rlheader is the wire format of rate limit responses, written once for
// the server (package httplimit) and the client side of Sluice:
//
//   - the RateLimit-Policy and RateLimit fields of
//     draft-ietf-httpapi-ratelimit-headers-11, serialized as canonical RFC 9651
//     Structured Fields by AppendPolicies and AppendStatuses and parsed
//     strictly by ParsePolicies and ParseStatuses;
//   - Retry-After (RFC 9110 §10.2.3): FormatRetryAfter, FormatRetryAfterDate
//     and ParseRetryAfter, which accepts delay-seconds and all three HTTP-date
//     formats;
//   - the application/problem+json body of a rejection (RFC 9457) with the
//     draft's quota-exceeded problem type: Problem and QuotaExceeded.
//
// # Serializing
//
// The Append functions write into a caller's buffer and allocate nothing
// when it is large enough, so a server can reuse one buffer per response:
//
//	buf = rlheader.AppendPolicies(buf[:0], policies...)
//	if len(buf) > 0 {
//		h.Set(rlheader.HeaderRateLimitPolicy, string(buf))
//	}
//
// An empty list serializes to nothing, and RFC 9651 says an empty List is not
// serialized at all: the caller must then omit the field rather than send it
// empty.
//
// Serialization never emits an invalid field, whatever the input:
//
//   - Integers are clamped to [0, MaxInteger] (RFC 9651 Integers have at most
//     15 digits, and every integer in these fields is non-negative);
//   - in names and units, '"' and '\' are escaped, and each character outside
//     printable ASCII (0x20-0x7E), including each non-ASCII rune and each
//     invalid UTF-8 byte, is replaced by '?';
//   - durations are rounded up to whole seconds (a client told to wait a
//     little longer is safe; one told to come back early is not).
//
// Validate reports the inputs that need such repair, so a configuration can
// be rejected at load time rather than quietly rewritten on the wire.
//
// # Parsing
//
// The parsers implement the whole RFC 9651 List grammar by hand (it is the
// product, not a dependency) and then apply the draft's rules. Any violation
// is an error, and the caller must then ignore the whole field: RFC 9651 §4.2
// and the draft's §7 ("Malformed RateLimit header fields MUST be ignored")
// both say so. Unknown parameters are ignored, as the draft allows. The one
// leniency is the RFC's own: a Byte Sequence may lack its "=" padding and may
// have non-zero pad bits.
//
// Everything in the package is safe for concurrent use; the functions keep no
// state.
package rlheader
