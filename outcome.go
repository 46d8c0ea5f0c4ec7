package sluice

// Outcome is how a decision ended, as the faces' observers (the service's
// and the middleware's) report it, so that one observer can show both.
// The zero value is OutcomeAllowed.
type Outcome uint8

// The outcomes of a decision.
const (
	// OutcomeAllowed: within the limit, and spent.
	OutcomeAllowed Outcome = iota
	// OutcomeLimited: over the limit, and refused.
	OutcomeLimited
	// OutcomeShadow: over the limit, but let through because the rule or
	// policy is in shadow mode (or the run is a dry run).
	OutcomeShadow
)

// String returns "allowed", "limited" or "shadow".
func (o Outcome) String() string {
	switch o {
	case OutcomeLimited:
		return "limited"
	case OutcomeShadow:
		return "shadow"
	}
	return "allowed"
}
