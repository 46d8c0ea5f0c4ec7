package failsafe

import (
	"errors"

	"github.com/sluicehq/sluice"
)

var _ sluice.LimitValidator = (*Limiter)(nil)

// ValidateLimit returns nil if the Limiter can serve lim: Primary's verdict
// when Primary is a sluice.LimitValidator (a limit Primary refuses would
// fail every call, not just while Primary is down), joined in Local mode
// with the local limiter's verdict on its share of lim. A limiter that is not
// a sluice.LimitValidator serves every valid limit.
func (l *Limiter) ValidateLimit(lim sluice.Limit) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	var errs []error
	cfg := &l.g.cfg
	if v, ok := cfg.Primary.(sluice.LimitValidator); ok {
		errs = append(errs, v.ValidateLimit(lim))
	}
	if l.mode == Local {
		if v, ok := cfg.Local.(sluice.LimitValidator); ok {
			errs = append(errs, v.ValidateLimit(cfg.Share(lim)))
		}
	}
	return errors.Join(errs...)
}
