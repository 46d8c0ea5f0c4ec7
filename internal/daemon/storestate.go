package daemon

import "github.com/sluicehq/sluice/admin/page"

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
