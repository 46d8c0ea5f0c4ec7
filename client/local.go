package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// localLimiter is the Limiter of a Pacer given none: the pure algorithms
// (package algorithm) in a map guarded by one mutex, on the system's
// monotonic clock, so that package client stands alone and picks no store.
// A Pacer's keys are the program's own (hosts, by default), few and not
// chosen by a peer; sweep drops the states of idle keys. The zero
// localLimiter is not usable; see newLocalLimiter.
type localLimiter struct {
	base   time.Time // wall time read once, then advanced by the monotonic clock
	baseNS int64

	mu     sync.Mutex
	states map[localKey]algorithm.Decider
}

// localKey separates a key's states by algorithm: a key paced by Limit
// and later by a learned policy of another algorithm starts afresh.
type localKey struct {
	key string
	alg sluice.Algorithm
}

var _ sluice.Limiter = (*localLimiter)(nil)

func newLocalLimiter() *localLimiter {
	now := time.Now()
	return &localLimiter{base: now, baseNS: now.UnixNano(), states: make(map[localKey]algorithm.Decider)}
}

// now returns the current instant in Unix nanoseconds.
func (l *localLimiter) now() int64 { return l.baseNS + int64(time.Since(l.base)) }

// AllowN implements sluice.Limiter: the errors are those of sluice.Check.
func (l *localLimiter) AllowN(_ context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := sluice.Check(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	k := localKey{key, lim.Algorithm}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.states[k]
	if st == nil {
		sts := algorithm.NewStates(lim, 1)
		if sts == nil {
			return sluice.Result{}, fmt.Errorf("%w: no algorithm %v", sluice.ErrInvalidLimit, lim.Algorithm)
		}
		st = sts.At(0)
		l.states[k] = st
	}
	return st.Take(l.now(), lim, cost), nil
}

// sweep drops the states that are as good as a fresh key's.
func (l *localLimiter) sweep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for k, st := range l.states {
		if st.Expires() <= now {
			delete(l.states, k)
		}
	}
}
