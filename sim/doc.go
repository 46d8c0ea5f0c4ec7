// Package sim simulates traffic through every Sluice algorithm on a
// simulated clock, to show each algorithm's traffic shape and measure how far
// it strays from the exact answer before you choose one.
//
// A simulation plays the arrivals of a Pattern (steady Poisson traffic,
// on/off bursts, the window boundary attack, a slow ramp, many keys with
// Zipf-distributed rates, or the replay of a file) through the pure state
// types of package algorithm: one state per key per algorithm, no store, no
// goroutine, no clock but the arrivals' own instants. Every algorithm gets
// the same nominal contract (Rate per Period, Burst for the buckets), and an
// exact log, one instant per admitted unit, is the reference that every
// algorithm is compared with (the sliding log is that exact log up to
// algorithm.LogEntries per period; above, it merges units into slots).
//
// Run returns a Report: per algorithm the requests admitted and rejected, the
// most units admitted to one key in any rolling window of the period and in
// any one-second span, the requests wrongly admitted and wrongly rejected
// compared with the exact log, and the memory a key's state takes. A Report
// writes itself as a table (WriteTable), as JSON (encoding/json) and as a
// chart (WriteChart, SVG or PNG). Accuracy runs the sliding window counter
// against the log over a large heavy-tailed population, as Cloudflare did.
//
// RunOverload is another kind of simulation: a backend whose latency grows
// with concurrency past its capacity (Little's law), with fixed and
// adaptive limits on requests in flight (package adaptive) in front of
// it, compared by p99 latency and goodput (OverloadReport: a table, JSON,
// a chart); adaptive.Gradient's probe times are jittered from a source
// seeded with the run's Seed.
//
// Everything is deterministic for a given seed: random numbers come from
// math/rand/v2's PCG seeded with Config.Seed.
package sim
