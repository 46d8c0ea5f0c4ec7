package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/redisstore"
)

// redisConns counts the proxy's conns (limit_conn) in flight on Redis, with
// redisstore.Leases once the store has connected, so that every proxy on
// the same Redis shares them. While Redis fails, -failure-mode applies:
// open admits (no slot is taken), closed refuses with conn_status, local
// counts in this process meanwhile. It is an httplimit.InFlight.
type redisConns struct {
	store *redisstore.Lazy
	mode  failsafe.Mode
	local httplimit.Slots // local mode's counts while Redis fails

	mu     sync.Mutex                        // held while the leases are made
	leases atomic.Pointer[redisstore.Leases] // made once the store has connected
}

var _ httplimit.InFlight = (*redisConns)(nil)

// Acquire takes one of max slots of key on Redis, or applies the failure
// mode when Redis cannot be asked.
func (c *redisConns) Acquire(ctx context.Context, key string, max int) (func(), bool, error) {
	l, err := c.get()
	if err == nil {
		var release func()
		var ok bool
		if release, ok, err = l.Acquire(ctx, key, max); err == nil {
			return release, ok, nil
		}
	}
	switch c.mode {
	case failsafe.Local:
		return c.local.Acquire(ctx, key, max)
	case failsafe.Closed:
		return nil, false, fmt.Errorf("%w: conns on Redis: %w", sluice.ErrUnavailable, err)
	default: // open: an error that is not ErrUnavailable, so httplimit admits
		return nil, false, fmt.Errorf("conns on Redis, failing open: %s", err)
	}
}

// get returns the leases of the connected store; once they are made, it
// takes no lock (every conns-limited request asks).
func (c *redisConns) get() (*redisstore.Leases, error) {
	s, err := c.store.Store()
	if err != nil {
		return nil, err
	}
	if l := c.leases.Load(); l != nil {
		return l, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.leases.Load(); l != nil {
		return l, nil
	}
	l, err := redisstore.NewLeases(s, redisstore.LeasesConfig{})
	if err != nil {
		return nil, err
	}
	c.leases.Store(l)
	return l, nil
}
