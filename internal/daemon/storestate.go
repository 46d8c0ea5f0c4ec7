package daemon

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/config"
)

// Breaker is a store's failure policy as the live page shows it: the name
// of its failure mode, whether the store is available (its breaker is
// closed) and how many of its partitions have their breaker open. The
// zero value is a policy whose store is unavailable.
type Breaker struct {
	Mode           string
	Available      bool
	OpenPartitions int
}

// StoreState returns what the live page of serve and proxy shows of the
// store named name: whether it is connected, and its breaker: "none"
// without a failure policy (b nil), else "open" when the store is
// unavailable, "partial" with the number of open partitions when some
// are open, "closed" otherwise.
func StoreState(name string, connected bool, b *Breaker) page.StoreState {
	st := page.StoreState{Name: name, Connected: connected, Breaker: "none"}
	if b == nil {
		return st
	}
	st.Breaker, st.FailureMode = "closed", b.Mode
	switch {
	case !b.Available:
		st.Breaker = "open"
	case b.OpenPartitions > 0:
		st.Breaker, st.OpenPartitions = "partial", b.OpenPartitions
	}
	return st
}

// PageConfig is the config that the live page of serve and proxy shows:
// the one recorded last by Loaded. It is safe for concurrent use; its zero
// value has none recorded.
type PageConfig struct {
	p atomic.Pointer[page.LoadedConfig]
}

// Loaded records rules (nil: rules the page does not list, such as the
// proxy's), read from source, as the config loaded now.
func (c *PageConfig) Loaded(rules *config.Config, source string) {
	c.p.Store(&page.LoadedConfig{Rules: rules, Source: source, Loaded: time.Now()})
}

// Running returns the config recorded last, or, before one is, a config
// with no rules from source.
func (c *PageConfig) Running(source string) page.LoadedConfig {
	if lc := c.p.Load(); lc != nil {
		return *lc
	}
	return page.LoadedConfig{Source: source}
}
