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

// WithLayoutOf returns lim, a limit that takes rule's place for some of
// rule's requests (a tenant's plan, an Envoy per-request override), in
// rule's layout: when both are sliding windows, lim with rule's Buckets and
// Moments, or with neither (the two-window counter) where lim's rate or
// period does not allow them; any other lim unchanged. A key decided by
// turns under rule and under lim then stays in one layout, rather than
// moving between two at each turn, each seeding the other with what it
// counted, which refuses a client at its limit nearly always
// (docs/algorithms.md, "The default").
func (lim Limit) WithLayoutOf(rule Limit) Limit {
	if lim.Algorithm != SlidingWindow || rule.Algorithm != SlidingWindow {
		return lim
	}
	l := lim
	l.Buckets, l.Moments = rule.Buckets, rule.Moments
	if l.Validate() != nil {
		l.Buckets, l.Moments = 0, 0
	}
	return l
}
