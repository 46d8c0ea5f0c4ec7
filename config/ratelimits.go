package config

import "iter"

// RateLimits yields every rule of c: its domains in name order, and in
// each the rules in config order, parents before their children, the limits of a rate_limits list in
// list order. A
// program checks the rules against what its store can serve with it.
func (c *Config) RateLimits() iter.Seq[*RateLimit] {
	return func(yield func(*RateLimit) bool) {
		for _, d := range c.sorted {
			if !yieldLevel(&d.root, yield) {
				return
			}
		}
	}
}

// yieldLevel yields the rules of lv and its descendants; false once yield
// has returned false.
func yieldLevel(lv *level, yield func(*RateLimit) bool) bool {
	for _, n := range lv.nodes {
		if n.limit != nil {
			if !yield(n.limit) {
				return false
			}
			for _, r := range n.limit.More {
				if !yield(r) {
					return false
				}
			}
		}
		if !yieldLevel(&n.children, yield) {
			return false
		}
	}
	return true
}
