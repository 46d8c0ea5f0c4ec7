package failsafe

import (
	"context"
	"slices"
	"sync"
	"time"
)

// callCtx is the context of one call to the primary: the caller's context
// with an earlier deadline (see Group.bound). It behaves as
// context.WithDeadline's would, but is made to be reused: a call that
// ends before its deadline and before the caller's context ends leaves
// its callCtx, timer and channel unused, and the next call takes them
// from the Group's pool, instead of allocating a context, a timer, two
// closures and a channel per decision (about 3,900 instructions of a
// ShouldRateLimit of 8,200 on the memory store behind the breaker).
//
// A callCtx that ended (its deadline passed, the caller's context ended)
// is never reused, and stays ended. The primary must not keep using a
// call's context after the call returned (the stores of this module do
// not): from then on it may be another call's.
type callCtx struct {
	timer    *time.Timer // ends the call at the deadline; made once, reset for every call
	expire   func()      // c.end(context.DeadlineExceeded), made once
	onParent func()      // c.end(the caller's error), made once

	mu       sync.Mutex // guards the fields below, which a reused callCtx changes
	parent   context.Context
	deadline time.Time
	stop     func() bool  // stops watching parent; nil while it is not watched (see Done)
	afters   []*afterFunc // to run when the call ends (see AfterFunc)
	done     chan struct{}
	err      error
}

// neverCanceled answers Value(k) with itself only for the key under which
// the context package finds a context's cancellation state: callCtx.Value
// uses it to keep that key from reaching the caller's context, whose
// cancellation is not the call's (context.Cause then reads Err, as it does
// for any context of another package).
var neverCanceled, _ = context.WithCancel(context.Background())

// Deadline returns the call's deadline, which is never after the caller's.
func (c *callCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

// Done returns a channel closed when the deadline passes or the caller's
// context ends. The caller's context is watched from the first call of
// Done on: a primary that never waits on Done (the memory store, a Redis
// call answered at once) costs no watch; Err looks at the caller's
// context itself.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	c.watchLocked()
	c.mu.Unlock()
	return c.done
}

// watchLocked watches the caller's context, once per call, unless the
// call ended; c.mu is held.
func (c *callCtx) watchLocked() {
	if c.stop == nil && c.err == nil && c.parent.Done() != nil {
		c.stop = context.AfterFunc(c.parent, c.onParent)
	}
}

// afterFunc is one function of callCtx.AfterFunc.
type afterFunc struct{ f func() }

// AfterFunc arranges for f to run in its own goroutine when the call ends
// (at once if it has), as context.AfterFunc does; stop prevents it and
// reports whether it did. The context package uses it for the contexts
// derived from c and for context.AfterFunc(c, f) (as pgx does for every
// query), instead of a goroutine per call that waits on Done. A function
// still registered when the call returns runs then, as the context
// package's cancel runs its children's.
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	c.watchLocked()
	c.afters = append(c.afters, a)
	return func() bool { return c.stopAfter(a) }
}

// stopAfter unregisters a, reporting whether it was still registered.
func (c *callCtx) stopAfter(a *afterFunc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.afters, a)
	if i < 0 {
		return false
	}
	c.afters = slices.Delete(c.afters, i, i+1)
	return true
}

// Err returns nil until the call ends, then context.DeadlineExceeded or
// the caller's context's error; once it returns an error, Done is closed.
func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		if err := c.parent.Err(); err != nil {
			c.endLocked(err)
		}
	}
	return c.err
}

// Value returns the caller's context's value for key.
func (c *callCtx) Value(key any) any {
	if neverCanceled.Value(key) == neverCanceled {
		return nil
	}
	c.mu.Lock()
	parent := c.parent
	c.mu.Unlock()
	return parent.Value(key)
}

// end ends the call with err (Canceled when nil), once: the first error
// stays.
func (c *callCtx) end(err error) {
	c.mu.Lock()
	c.endLocked(err)
	c.mu.Unlock()
}

// endLocked is end with c.mu held: it closes Done and starts the
// functions of AfterFunc.
func (c *callCtx) endLocked(err error) {
	if c.err != nil {
		return
	}
	if err == nil {
		err = context.Canceled
	}
	c.err = err
	close(c.done)
	for _, a := range c.afters {
		go a.f()
	}
	c.afters = nil
}

// String names the context as the context package's do.
func (c *callCtx) String() string { return "failsafe.callCtx" }

// callCtx returns a context for one call to the primary: parent with the
// deadline now+d; release gives it back.
func (g *Group) callCtx(parent context.Context, now time.Time, d time.Duration) *callCtx {
	c, _ := g.calls.Get().(*callCtx)
	if c == nil {
		c = &callCtx{done: make(chan struct{})}
		c.expire = func() { c.end(context.DeadlineExceeded) }
		c.onParent = func() {
			c.mu.Lock()
			parent := c.parent
			c.mu.Unlock()
			c.end(parent.Err())
		}
	}
	c.mu.Lock()
	c.parent, c.deadline = parent, now.Add(d)
	c.mu.Unlock()
	if err := parent.Err(); err != nil {
		c.end(err)
		return c
	}
	if d <= 0 {
		c.end(context.DeadlineExceeded)
		return c
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.expire)
	} else {
		c.timer.Reset(d)
	}
	return c
}

// release ends the call: a callCtx whose timer and watch of the caller's
// context were both stopped before they fired goes back to the pool; one
// that ended, or is ending, is left to the garbage collector, ended.
func (g *Group) release(c *callCtx) {
	reuse := c.timer != nil && c.timer.Stop()
	c.mu.Lock()
	if c.stop != nil && !c.stop() {
		reuse = false
	}
	c.stop = nil
	reuse = reuse && c.err == nil && len(c.afters) == 0
	if reuse {
		// A context derived from this one may still look at it for a
		// moment (the context package's watch of a derived context is a
		// goroutine): it sees a context that does not end.
		c.parent = context.Background()
	}
	c.mu.Unlock()
	if !reuse {
		c.end(context.Canceled)
		return
	}
	g.calls.Put(c)
}
