// Package service is Sluice's rate limit service: one decision function,
// (*Service).ShouldRateLimit, that answers Envoy's RateLimitService v3
// requests with envoyproxy/ratelimit's semantics, and thin adapters that put
// it on the wire: gRPC (RegisterGRPC, with the standard health service) and
// HTTP (Handler: POST /json, GET /healthcheck, GET /metrics, and the
// forward-auth endpoint /auth for reverse proxies).
//
// # Semantics
//
// A RateLimitRequest names a domain and one or more descriptors, each a list
// of key/value entries. The Rules (package config's tree) map each
// descriptor to at most one rule, and every descriptor is evaluated:
//
//   - An empty domain, an empty descriptor list, a descriptor without
//     entries or an entry with an empty key is an error (gRPC
//     InvalidArgument, HTTP 400).
//   - The cost of a descriptor is its own hits_addend when set (0 there
//     means a check only), else the request's hits_addend, where 0 means 1.
//   - A descriptor's limit override (requests_per_unit and unit) replaces
//     the matched rule's limit; it applies even when no rule matches (but
//     not in a domain the rules do not configure, nor without rules), and
//     it is never in shadow mode, as in envoyproxy/ratelimit. The override
//     keeps a matched rule's algorithm and name; without one it is a fixed
//     window named after the descriptor.
//   - A cost over Config.MaxCost or an override over Config.MaxOverride
//     (both chosen by the caller) is an error (gRPC InvalidArgument, HTTP
//     400) naming the maximum; the store is not touched.
//   - No rule: OK, current_limit unset, limit_remaining 0, the store not
//     touched. A rule named in another matched rule's replaces list is
//     dropped the same way.
//   - unlimited: OK, limit_remaining 4294967295 (MaxUint32), current_limit
//     unset, the store not touched.
//   - requests_per_unit 0 blocks: OVER_LIMIT always, without the store.
//   - A cost above the limit's capacity (sluice.Limit.Capacity) can never
//     be admitted: OVER_LIMIT, not an error, without the store.
//   - Otherwise the Limiter spends the cost under the rule's sluice.Limit,
//     at the key Prefix + domain + "_" + key_value pairs joined by "_"
//     (envoyproxy/ratelimit's cache key without its window suffix: the
//     algorithms keep their own windows). Like envoyproxy/ratelimit's keys,
//     these are ambiguous when keys or values contain "_". A key longer
//     than sluice.MaxKeyLen is shortened to its first bytes and a hash of
//     the whole (sluice.HashKey), rather than refused: refusing would let a client with a
//     huge header value turn every decision into an error, which Envoy's
//     default failure_mode_deny=false admits.
//   - a rule's shadow_mode: the decision is made and counted
//     (sluice_rls_shadow_mode_total), and its descriptor's status is OK.
//     Config.ShadowMode (SHADOW_MODE) is applied last, as in
//     envoyproxy/ratelimit: statuses, counters, metadata and headers are
//     as without it, and only an OVER_LIMIT overall code becomes OK
//     (sluice_rls_global_shadow_mode_total).
//   - overall_code is OVER_LIMIT if any descriptor is, with quotas set
//     apart: a descriptor whose rule has quota_mode (under
//     Config.QuotaMode, any descriptor but an unlimited one, one without
//     a rule included) makes the answer OVER_LIMIT only when every quota
//     descriptor of the request is over its limit, as in
//     envoyproxy/ratelimit; its own status still says OVER_LIMIT.
//     Descriptors are evaluated in order and each spends independently,
//     so an allowed descriptor has spent its cost even when another is
//     over the limit (as envoyproxy/ratelimit's INCRBY does), unless
//     Config.StopIncrementWhenOverLimit: then what the others spent is
//     refunded (sluice.Refunder) and their limit_remaining includes it.
//   - share_threshold: at a wildcard level with it, the key holds the
//     pattern (such as "files/*") instead of the request's value, so that
//     every value the pattern matches counts in one counter.
//   - A rate_limits list (a Sluice extension: several limits on one
//     descriptor, such as 10 a second and 10,000 a day) is charged on all
//     its limits or none: each spends in turn (the first at the
//     descriptor's key, the others at the key + "#" + the period in
//     seconds, such as "#86400s"), and the first that refuses makes the
//     descriptor OVER_LIMIT after what the limits before it spent is
//     refunded. The status and headers describe the limit that refused
//     (or a later one that, read without spending, would refuse for
//     longer), else the one closest to exhaustion; a check reads every
//     limit and reports the closest. HeadersDraft11's RateLimit-Policy
//     lists every limit of the list, an unnamed one after the first as
//     FullKey#<seconds>s.
//
// Each status carries current_limit {requests_per_unit, unit, name} as
// configured (or overridden), limit_remaining (sluice.Result.Remaining,
// clamped to uint32, 0 when over) and duration_until_reset: for an allowed
// descriptor the Result's ResetAfter (the time until the key is as fresh as
// a new one; for the default fixed window, the end of the epoch-aligned
// window, as in envoyproxy/ratelimit), for a denied one its RetryAfter (the
// time until the same cost would be admitted). A rule with a unit
// multiplier (a Sluice extension) reports its configured unit: the proto
// has no way to say "30 seconds".
//
// # Check-only descriptors (hits_addend 0)
//
// envoyproxy/ratelimit answers a cost of 0 with INCRBY 0: the counter is
// read, not changed, and the answer is OVER_LIMIT only if the counter is
// already above the limit. Sluice reads the key the same way, through
// sluice.Peeker (every store and wrapper of this module is one), and spends
// nothing: limit_remaining is the key's remaining now, duration_until_reset
// its real reset (for a fixed window, the end of the window), and the code
// OK unless the key is over its limit (a limit lowered since it was spent;
// a denied request spends nothing in Sluice, so a key at its limit checks
// OK with remaining 0, as envoyproxy/ratelimit's check at the limit does).
// A store failure is a decision's: the rule's failure mode answers. With a
// Limiter that cannot peek, a check-only descriptor is answered without the
// store: OK (OVER_LIMIT for a blocking rule), current_limit set,
// limit_remaining the limit's capacity, duration_until_reset unset. A check
// never chooses the response headers. A descriptor with is_negative_hits
// spends its cost like any other, as envoyproxy/ratelimit counts it (it
// ignores the field), unless Config.AllowRefunds: then it gives its cost
// back through sluice.Refunder, when the Limiter implements it, never
// above a fresh key's allowance, and is answered like a check. Refunds are
// off by default because any caller that reaches the service could
// otherwise restore its own exhausted key.
//
// # Dynamic metadata
//
// With Config.DynamicMetadata (envoyproxy/ratelimit's
// RESPONSE_DYNAMIC_METADATA), the response's dynamic_metadata is a Struct
// of envoyproxy/ratelimit's shape: "domain"; "descriptors", one per
// request descriptor, {"entries": ["key=value", ...], "limit": the
// override as "requests_per_unit:N unit:UNIT" when sent, "hitsAddend":
// its own when set}; "hitsAddend", the request's, when not 0; and
// "metadata", when not empty: the deep merge of the metadata of the
// rules whose descriptors were admitted (OK, a rule matched, not
// unlimited), in request order, mappings merged and otherwise the first
// value kept. Over-limit descriptors, quota ones included, add nothing;
// shadow-mode ones answered OK do. envoyproxy/ratelimit loses a rule's
// metadata when the rule has detailed_metric, when value_to_metric
// changes its name and when a limit override applies; Sluice keeps it in
// all three, taking the loss for a fault.
//
// # Store failures
//
// Without Config.Failure, an error of the Limiter is returned as an error
// (gRPC Unavailable, HTTP 503) and counted in sluice_rls_store_errors_total;
// Envoy then applies its failure_mode_deny. A Limiter wrapped in package
// failsafe chooses one policy for every rule: its Open and Local modes
// answer with decisions, and its Closed mode (an error wrapping
// sluice.ErrUnavailable that comes with a denying Result) is answered
// OVER_LIMIT, because an error would let Envoy's default fail-open admit
// the request. Rules' failure_mode is then ignored.
//
// With Config.Failure (a FailurePolicy; Limiter is then the bare store),
// each rule's failure_mode decides, "" meaning FailurePolicy.Mode (default
// open; sluice serve's is local): "open" answers OK with the rule's whole allowance reported
// remaining, "closed" answers OVER_LIMIT with duration_until_reset the time
// until the store is tried again, and "local" decides on a local store
// (FailurePolicy.Local, which the caller picks, such as a memstore.Store:
// the Service builds no store; without it New refuses Mode local, and New
// and SetRules refuse a *config.Config with a local rule, naming its file
// and line) under the rule's share of the limit (the limit divided by
// FailurePolicy.Nodes, by default, and at most that share of what the store
// last reported left for the key). A limit override keeps its matched
// rule's mode. Every such decision counts in sluice_rls_store_errors_total
// and in sluice_rls_fallback_decisions_total by rule and mode.
//
// One circuit breaker (a failsafe.Group around the store, whose Limiter of
// each mode a rule's failure_mode picks once, when the rule is first used)
// serves every rule, whatever its mode: the store's health is the store's,
// not a rule's. It is partitioned by a hash of the key (DefaultPartitions):
// failures of keys of one partition, whatever their rules' modes, add up to
// its Threshold and open that partition only, so that one hot key (or
// tenant) whose calls time out sends only its partition's keys to their
// failure modes; a quarter of the partitions open opens the whole breaker,
// after which no rule calls the store (so a dead Redis costs no timeouts,
// however traffic is spread over modes), and one successful probe brings
// every rule back to the store. A breaker per mode would let a rarely used
// closed rule keep paying timeouts after the busy open rules' breaker had
// opened, and would probe the same store several times. A refund
// (is_negative_hits under Config.AllowRefunds) goes to the store while
// the breaker is closed, to the local store for a local rule while it is
// open, and is dropped (counted, not an error) when the store fails.
//
// # Forward auth
//
// With Config.ForwardAuth, Handler serves /auth (ForwardAuthPath, any
// method) for Traefik's forwardAuth, Caddy's forward_auth and NGINX's
// auth_request. Config.ForwardAuth is a config's forward_auth section
// (config.ForwardAuth). Each of its descriptors is built from the forwarded
// request, entry by entry (config.AuthEntry): the client address
// (client_ip: the trusted X-Forwarded-For or Forwarded header, through
// Config.AuthResolver, which must trust the proxy), the method
// (X-Forwarded-Method, else X-Original-Method, else the auth request's
// own), the URI or its path (X-Forwarded-Uri, else X-Original-URI), the
// host (X-Forwarded-Host), a named header, or a literal. A
// descriptor with an entry whose value is missing or empty is left out, as
// Envoy leaves out a descriptor whose action finds nothing; with none left
// the answer is 200 without asking anything.
//
// The answer is 200 when allowed and 429 when over the limit, with
// package httplimit's header contract: RateLimit-Policy listing every
// enforced rule of the request and RateLimit for the one closest to
// exhaustion (draft-11, whatever Config.Headers says; the legacy trio too
// with HeadersLegacy), and on a 429 Retry-After, the reason header
// (rlheader.HeaderReason) and an application/problem+json body of the
// quota-exceeded type listing the violated rules. Every answer has
// Cache-Control: no-store, since an auth decision must not be cached. The
// proxy passes a 429 and its headers to the client; on a 200, Traefik's
// authResponseHeaders or NGINX's auth_request_set can copy the RateLimit
// fields onward. A store failure (without Config.Failure) is 503 with
// Retry-After: 1, which these proxies also refuse with; set Config.Failure
// to fail open instead.
//
// # Response headers
//
// Config.Headers says what goes into response_headers_to_add. Both modes
// describe one descriptor: the enforced (not shadow, not check-only)
// descriptor that is over the limit with the longest wait, else the one
// with the fewest remaining units, ties to the first (rlheader.Closer, the
// rule package httplimit follows too). HeadersDraft11 adds
// RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers-11),
// the policy named by the rule's Name, else its FullKey; HeadersLegacy adds
// envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED trio (names set by
// Config.LegacyNames). Both add Retry-After when the answer is OVER_LIMIT.
//
// # Metrics
//
// With a Config.Registerer, the service counts hits (in units of cost),
// over-limit, near-limit (an admitted decision after which the units spent
// exceed ⌊capacity × Config.NearLimitRatio⌋, by default 0.8, as
// envoyproxy/ratelimit's NEAR_LIMIT_RATIO), within-limit and shadow-mode
// hits per rule, store errors per rule, and the decision latency. The only
// per-rule label is the rule's FullKey, whose values the configuration
// bounds (a share_threshold level keeps its pattern); a rule with
// detailed_metric is labelled with the request's descriptor
// (domain.key_value.key_value, the "_" even for an empty value, a
// share_threshold level's pattern as its value) instead, and one with
// value_to_metric levels with its FullKey in which those levels that
// matched by key only or by a wildcard name the request's value; either
// for at most Config.MaxDetailedSeries names per rule (default 100), the
// names past them counted under FullKey#other.
package service
