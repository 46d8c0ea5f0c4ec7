package relief

import (
	"errors"

	"github.com/sluicehq/sluice"
)

var (
	_ sluice.LimitValidator = (*OverLimitCache)(nil)
	_ sluice.LimitValidator = (*Hybrid)(nil)
	_ sluice.LimitValidator = (*Batcher)(nil)
)

// validate returns lim's validity and, when inner is a
// sluice.LimitValidator, inner's verdict on it; a limiter that is not one
// serves every valid limit.
func validate(inner sluice.Limiter, lim sluice.Limit) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	return validateInner(inner, lim)
}

// validateInner is validate for a lim already known to be valid.
func validateInner(inner sluice.Limiter, lim sluice.Limit) error {
	if v, ok := inner.(sluice.LimitValidator); ok {
		return v.ValidateLimit(lim)
	}
	return nil
}

// ValidateLimit returns nil if the cache's inner limiter can serve lim (see
// sluice.LimitValidator).
func (c *OverLimitCache) ValidateLimit(lim sluice.Limit) error { return validate(c.inner, lim) }

// ValidateLimit returns nil if the Batcher's inner limiter can serve lim
// (see sluice.LimitValidator).
func (b *Batcher) ValidateLimit(lim sluice.Limit) error { return validate(b.inner, lim) }

// ValidateLimit returns nil if the global limiter can serve lim and the
// local one its share of lim (see sluice.LimitValidator); the errors of both
// are joined.
func (h *Hybrid) ValidateLimit(lim sluice.Limit) error {
	if err := lim.Validate(); err != nil {
		return err // before h.share, which expects a valid limit
	}
	return errors.Join(validate(h.local, h.share(lim)), validateInner(h.global, lim))
}
