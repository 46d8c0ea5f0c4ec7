// Package clocktest provides a fake sluice.Clock that tests drive by hand.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package clocktest

import (
	"sync"
	"time"
)

// Epoch is the instant a new Clock starts at: 2023-11-14 22:13:20 UTC, Unix
// time 1700000000, the instant the conformance cases use.
var Epoch = time.Unix(1700000000, 0).UTC()

// Clock is a fake clock. Its zero value is not usable; call New. It is safe
// for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock set to Epoch.
func New() *Clock { return &Clock{now: Epoch} }

// At returns a Clock set to t.
func At(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward if d is negative) and
// returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
