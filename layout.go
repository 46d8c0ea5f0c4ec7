package sluice

// The sliding window's default layout in Sluice's configurations: a
// sliding_window rule, plan limit or per-request override that sets
// neither buckets nor moments gets this many sub-windows and means per
// sub-window, where the limit allows them (DefaultSlidingWindow).
const (
	DefaultBuckets = 16
	DefaultMoments = 2
)

// DefaultSlidingWindow is the one default layout of a sliding window that
// a configuration leaves unset: lim with Buckets DefaultBuckets and Moments
// DefaultMoments when lim is a sliding window that sets neither and allows
// them (a rate from 1 to MaxMomentsRate, a period a whole number of
// microseconds times DefaultBuckets); any other lim unchanged. Every
// configuration that decides a key (the rate limit config, the proxy file,
// tenants' plans, Envoy's per-request overrides) goes through it, so that
// one key is not decided under two layouts by turns, each seeding the other
// (docs/algorithms.md, "The default"). A Limit's zero Buckets and Moments
// stay the two-window counter for the Go library: it does not call this.
func DefaultSlidingWindow(lim Limit) Limit {
	if lim.Algorithm != SlidingWindow || lim.Buckets != 0 || lim.Moments != 0 || lim.Rate <= 0 {
		return lim
	}
	d := lim
	d.Buckets, d.Moments = DefaultBuckets, DefaultMoments
	if d.Validate() != nil {
		return lim // the rate or the period does not allow them
	}
	return d
}
