// Package promreg registers Prometheus collectors so that a second
// registration of the same metrics shares the first one's series.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package promreg

import (
	"errors"
	"sync"
	"sync/atomic"

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

// Children caches a metric vector's children by their label values (one
// or two), so that a hot path finds a child with one map read and no
// lock, where the vector's WithLabelValues hashes and checks the values
// and takes a read lock, shared by every core, on each call. A child
// stays cached for the vector's life: use it only with vectors whose
// series are never deleted, and label values bounded by the
// configuration, never by traffic. The zero Children is not usable; make
// one with NewChildren. Safe for concurrent use.
type Children[M any] struct {
	of func(...string) M
	mu sync.Mutex // serializes the copies of a miss
	m  atomic.Pointer[map[[2]string]M]
}

// NewChildren returns a cache of the children that of (a vector's
// WithLabelValues) returns.
func NewChildren[M any](of func(...string) M) *Children[M] {
	c := &Children[M]{of: of}
	c.m.Store(&map[[2]string]M{})
	return c
}

// With1 returns the child of a one-label vector with value a.
func (c *Children[M]) With1(a string) M {
	if m, ok := (*c.m.Load())[[2]string{a}]; ok {
		return m
	}
	return c.add([2]string{a}, 1)
}

// With2 returns the child of a two-label vector with values a and b.
func (c *Children[M]) With2(a, b string) M {
	if m, ok := (*c.m.Load())[[2]string{a, b}]; ok {
		return m
	}
	return c.add([2]string{a, b}, 2)
}

// add makes the child of the first n values of k and stores it in a copy
// of the map.
func (c *Children[M]) add(k [2]string, n int) M {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.m.Load()
	if m, ok := old[k]; ok {
		return m
	}
	m := c.of(k[:n]...)
	next := make(map[[2]string]M, len(old)+1)
	for key, v := range old {
		next[key] = v
	}
	next[k] = m
	c.m.Store(&next)
	return m
}
