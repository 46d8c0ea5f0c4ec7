// Package rlqs serves Envoy's rate limit quota service
// (envoy.service.rate_limit_quota.v3, RLQS) on the rules of a loaded
// config.
//
// One bidirectional stream per Envoy. The first message names the domain
// (a missing one ends the stream with InvalidArgument, and so does a later
// different one). Each bucket id is a set of descriptor entries under that
// domain, ordered by the config's tree (config.Domain.LookupBucket): the
// bucket {"api": "v1"} is the descriptor [api=v1]. Its rule's limit is
// divided among every client that reports the bucket, on this replica and
// others sharing the Store: a reserve (rlqs.reserve) equally, the rest by
// max-min fairness over reported demand (allowed plus denied per second,
// over time_elapsed or the time since the stream's previous report of the
// bucket, whichever is longer, counted at most 10 times the rule's rate),
// first among peers (a verified client certificate, else an IP address),
// then among each peer's clients, so that one peer's streams cannot
// shrink another peer's share below (1−reserve)×limit/peers.
// Each report is answered with each reported bucket's assignment, a
// TokenBucket of the client's share (whole-second fill intervals, rounded
// down), ALLOW_ALL for an unlimited or shadow-mode rule or a bucket no
// rule matches, DENY_ALL for a rule of 0 requests, with the domain's
// assignment_ttl. A bucket with no requests for abandon_after gets an
// AbandonAction. On Shutdown, every bucket's strategy is sent with a time
// to live of 0, so that each Envoy applies its expired_assignment_behavior.
// Malformed reports (a bucket id of no pairs, empty keys or values,
// negative time_elapsed) end the stream with InvalidArgument; a stream
// with no message for Config.IdleTimeout ends with DeadlineExceeded.
//
// Memory is bounded in bytes: the streams and buckets of all clients
// together count against Config.MaxBytes (see bucketCost), and the
// streams against Config.MaxStreams and, per connection,
// Config.MaxStreamsPerConn. A stream past them is refused with
// ResourceExhausted; a new bucket past the budget gets no assignment (the
// client keeps its no_assignment_behavior) while the stream and its other
// buckets go on.
package rlqs
