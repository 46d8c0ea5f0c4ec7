// Package config reads rate limit configs in envoyproxy/ratelimit's YAML
// format, with Sluice's extensions, and compiles them into a descriptor tree
// that answers, per request descriptor, which rule applies.
//
// # Format
//
// A config is one file, or a directory of *.yaml and *.yml files (not dot
// files), each holding one domain:
//
//	domain: shop
//	descriptors:
//	  - key: remote_address          # required
//	    rate_limit:                  # optional: no rate_limit and no
//	      unit: second               # descriptors is an allow-list entry
//	      requests_per_unit: 10
//	  - key: remote_address
//	    value: 192.0.2.7             # optional; may hold '*' wildcards
//	    rate_limit: {unit: second, requests_per_unit: 0}   # blocks
//	  - key: path
//	    value: /api/*
//	    share_threshold: true        # every /api/... value shares one counter
//	    descriptors:                 # nested: matched by deeper requests
//	      - key: user
//	        shadow_mode: true        # counted, never enforced
//	        rate_limit:
//	          name: api_user
//	          unit: minute
//	          requests_per_unit: 100
//	          algorithm: token_bucket   # Sluice: default fixed_window
//	          burst: 20                 # Sluice: default requests_per_unit
//	          unit_multiplier: 5        # Sluice: 100 per 5 minutes
//	          failure_mode: closed      # Sluice: open, closed or local
//
// The keys of envoyproxy/ratelimit are accepted with its meanings: on a
// descriptor key, value, rate_limit, descriptors, shadow_mode,
// detailed_metric, value_to_metric, share_threshold, quota_mode and
// metadata (a mapping of anything, returned in the service's
// dynamic_metadata; RateLimit.Metadata); in a rate_limit unit (second,
// minute, hour, day, week, month, year; any case; and Sluice's quarter,
// only with a calendar block), requests_per_unit,
// unlimited, name and replaces (a list of {name: ...}). Sluice adds
// algorithm, burst, buckets (sliding_window only: the sub-windows its
// counter keeps per period, 1 to 16; see docs/algorithms.md), moments
// (sliding_window only: the means each sub-window keeps of where its
// arrivals fell, 0 to 8, at most 10,000 requests per unit;
// sluice.Limit.Moments),
// unit_multiplier, failure_mode, calendar, billable
// (true: a PostgreSQL store keeps the rule's periods as its ledger after
// they end; sluice.Limit.Billable) and precision (a sliding_log's slot of
// time: sluice.Limit.Precision) under rate_limit, a rate_limits list
// beside it (below), a forward_auth section beside descriptors (see
// Forward auth below), and max_log_entries beside domain: the most entries
// one key of a sliding_log rule may hold at worst (DefaultMaxLogEntries; a
// rule above it is refused at its line unless its precision brings it
// within). Anchors, aliases and
// merge keys (<<) work as in YAML.
//
// A unit is a fixed length counted from the Unix epoch, as in
// envoyproxy/ratelimit: a day is 24 hours of UTC, a month 30 days, a year
// 365. A calendar block on a fixed_window of unit day, week, month, quarter
// or year makes the window the calendar period in a time zone instead.
// Quarter is not an envoyproxy/ratelimit unit and has no fixed length, so
// unit quarter without a calendar block is an error:
//
//	rate_limit:
//	  unit: month
//	  requests_per_unit: 10000
//	  calendar:
//	    time_zone: Europe/Berlin   # an IANA name, or UTC; required
//	    anchor_day: 15             # month, quarter or year: the period starts on the 15th (1-31, clamped)
//	    # anchor_month: 4          # year: starts in April; quarter: April, July, October, January
//	    # first_weekday: sunday    # week: default iso (Monday)
//
// The period is [local midnight of its first day, local midnight of the
// next period's first day), exact across daylight saving changes (see
// package calendar); RateLimit.Limit.Calendar holds it.
//
// A descriptor may carry several limits, each a rate_limit block, in a
// rate_limits list instead of its rate_limit (a Sluice extension;
// envoyproxy/ratelimit refuses the same key twice as a duplicate):
//
//	descriptors:
//	  - key: user
//	    rate_limits:
//	      - {unit: second, requests_per_unit: 10}
//	      - {name: daily, unit: day, requests_per_unit: 10000}
//
// A request that matches it is admitted only when every limit admits it,
// and is then charged on all of them (the service refunds the others when
// one refuses). The list's first limit is the RateLimit that Lookup
// returns, the others its More. A list's limits have periods that differ,
// and none is unlimited, 0 (a block) or a replaces: those are rate_limit
// blocks; a rule's name in a list may not be replaced.
//
// metadata values keep their YAML type (strings, whole numbers as int64,
// other numbers as float64, booleans, null, lists, mappings). A plain
// y, yes, n, no, on or off (any of their case forms) in metadata is the
// boolean envoyproxy/ratelimit's YAML 1.1 reader makes of it (this
// package's YAML 1.2 reader would make it a string), with a warning in
// Domain.Warnings: quote it for a string.
//
// What envoyproxy/ratelimit accepts and ignores loads, with a warning:
// shadow_mode, quota_mode, detailed_metric and metadata on a descriptor
// without a rule of its own (envoyproxy/ratelimit reads them only beside
// the descriptor's own rate_limit, so they do not pass to the rules below),
// rate_limit: null (no rule; a warning only on a leaf, where a block may
// have lost its indent) and name: "" (no name). Envoy Gateway's translator
// writes all of these; refusing them would refuse its configs over xDS.
//
// Reading is bounded by a file's bytes, since a config is input like any
// other. Each file must be a regular file (symlinks are followed) of at
// most 1 MiB: a directory, FIFO or device named *.yaml is an error, not
// skipped and never waited on. A file holds one YAML document. Aliases
// count against the same budget as literal content: with every alias
// replaced by what it names, each time it is used, a file may hold at most
// one YAML node per byte plus 4096, so an anchor reused as a default is
// fine and an anchored list aliased by every rule is refused; so is an
// alias inside the node it names. A key may appear once in a mapping.
//
// Loading is strict where envoyproxy/ratelimit is strict and in a few places
// where it is silent: an unknown key, a missing or empty domain or key, a
// unit together with unlimited: true, a missing unit or requests_per_unit on
// a limited rule, a duplicate key/value at one level, a duplicate domain
// across files (unless Options.MergeDomains, envoyproxy/ratelimit's
// MERGE_DOMAIN_CONFIG, merges them), share_threshold without a wildcard value, a replaces naming
// no rule of the domain, rate_limit beside rate_limits, burst with a window
// algorithm, a limit that
// sluice.Limit.Validate rejects, and a forward_auth section that is
// incomplete or in a second domain are all errors. Every error is an *Error that
// names the file, line and column, such as
//
//	ratelimit.yaml:12:7: config: unknown key "requets_per_unit" in rate_limit (did you mean "requests_per_unit"?)
//
// # Matching
//
// Lookup follows envoyproxy/ratelimit. The request's entries are walked
// level by level from the domain's top level. At each level the entry
// (key, value) picks one descriptor:
//
//  1. the descriptor with that key and exactly that value; else
//  2. the first descriptor, in config order, with that key and a wildcard
//     value that matches; else
//  3. the descriptor with that key and no value.
//
// There is no backtracking: once a level has picked a descriptor, a less
// specific sibling is not tried even if it would match deeper. The rule
// applies only when the request's last entry picks a descriptor that has a
// rate_limit: a request of two entries never matches a rule configured at
// depth one, nor the other way round.
//
// A value that contains '*' is a pattern in which each '*' matches any run
// of characters, the empty one included; "foo*" is the prefix match of
// envoyproxy/ratelimit. (There only a trailing '*' is special; a '*'
// elsewhere is literal.)
//
// # Forward auth
//
// A domain's file may also say how the forward-auth endpoint of `sluice
// serve` (/auth, called by Traefik's forwardAuth, Caddy's forward_auth and
// NGINX's auth_request) builds this domain's request descriptors from the
// request the proxy forwards. This is a Sluice extension; envoyproxy/ratelimit
// has no such key, and a file without it is unchanged:
//
//	forward_auth:
//	  trusted_proxies: [10.0.0.0/8, 192.0.2.7]   # optional
//	  path_semantics: servlet         # optional: strict (default), case_insensitive, iis, servlet
//	  descriptors:                    # one RateLimitRequest descriptor each
//	    - entries:
//	        - {key: remote_address, from: client_ip}
//	    - entries:
//	        - {key: method, from: method}
//	        - {key: path, from: path}
//	    - entries:
//	        - {key: tenant, from: header, header: X-Tenant}
//	    - entries:
//	        - {key: generic_key, from: literal, value: api}
//	        - {key: uri, from: uri}
//
// An entry's from is one of client_ip (the client's address, from the
// X-Forwarded-For entries written by trusted proxies), method, uri (path and
// query), path, header (the request header named by header) and literal
// (value itself); header goes with from: header only, value with from:
// literal only. trusted_proxies lists networks or single addresses, and may
// be empty when the server is told its proxies otherwise (sluice serve
// -trusted-proxies). path_semantics says how the application reads a path
// (request.PathSemantics): the path of path and uri entries is folded by
// it, and rule values of their keys must be folded too. The descriptors
// are matched against the domain's rules like any request's. At most one
// domain of a Config has a forward_auth section. ForwardAuth holds it,
// compiled; Dump prints it after the domain's tree.
//
// A Config is immutable once loaded and safe for concurrent use; Lookup does
// not allocate.
package config
