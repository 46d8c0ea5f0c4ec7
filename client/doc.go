// Package client is the calling side of a rate limit: code that sends
// requests to a limited API and should neither make an overload worse nor
// come back in waves.
//
// It has five parts, each usable alone; Transport, Pacer and Breaker compose
// as http.RoundTrippers:
//
//   - Backoff: exponential growth with a cap and full jitter by default
//     (equal and decorrelated jitter as options), a maximum number of
//     attempts and a maximum total time, and an injectable random source.
//   - Transport: a retrying RoundTripper. It retries 429, 502, 503 and 504
//     (configurable) and transport errors, only for idempotent methods or
//     requests carrying an Idempotency-Key, rewinding bodies through
//     GetBody. It waits as the server says (Retry-After, then the RateLimit
//     field's t) with a little jitter, else as the Backoff says, and never
//     past the request's deadline or MaxServerWait.
//   - Pacer: a RoundTripper that keeps requests under a limit with a token
//     bucket from package sluice (per host, or per key), waiting rather than
//     sending a request that would be refused, and that adapts to the
//     server's RateLimit field (what is left) and RateLimit-Policy field
//     (the quota), never above its own limit.
//   - Breaker: an optional circuit breaker (package failsafe's Breaker)
//     that fails fast while a dependency keeps failing.
//   - Retry and Do: the Transport's loop for any operation, on the same
//     Backoff. The operation marks an error as final with Permanent, or
//     passes on a server's wait with RetryAfter.
//
// The recommended stack, outermost first:
//
//	hc := &http.Client{Transport: &client.Transport{
//		Base: &client.Pacer{
//			Limit: sluice.PerSecond(9), // below the server's 10/s
//			Base:  client.NewBreaker(http.DefaultTransport, client.BreakerSettings{Name: "api"}),
//		},
//	}}
//
// Every retry then goes through the pacer, so retries are paced too, and the
// breaker sees each attempt on the wire.
//
// # One retry layer
//
// Retry layers multiply: three layers of four attempts make 64 requests out
// of one, at the moment the server can least afford them. A Transport marks
// the requests it sends, and Retry and Do mark the context they pass to
// their operation; a Transport, Retry or Do reached with a mark makes a
// single attempt, so only the outermost layer retries. Pass the
// operation's context on to the requests it makes, or the mark is lost.
//
// The mark means nothing to retry layers from elsewhere: an SDK or an HTTP
// client that retries on its own, or a service mesh that does. Keep exactly
// one layer. Either turn the other layer's retries off (its max retries
// set to 0) and let this package retry, or keep the other and give the
// Transport (or Retry) a Backoff with MaxAttempts 1; keep the layer that
// honours Retry-After and caps the total time. A Pacer and a Breaker never
// retry, so they sit under any retrying layer without multiplying it.
//
// # Time
//
// Waits use time.NewTimer and the request's context, so code and tests run
// on the fake clock of testing/synctest; no sleep is ever longer than the
// request's deadline allows. The headers are parsed by package rlheader;
// malformed fields are ignored, as RFC 9110 and the RateLimit draft require.
package client
