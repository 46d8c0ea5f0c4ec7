// Package promreg registers Prometheus collectors so that a second
// registration of the same metrics shares the first one's series.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg and returns it; when reg already has an
// identical collector (same names, labels and help), Register returns that
// one instead, so that whatever counts into the result shows in reg. Any
// other registration error is returned as is, with c.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
