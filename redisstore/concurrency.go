package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
)

// concurrencyScript is the in-flight limit's one script.
var concurrencyScript = rueidis.NewLuaScript(scriptText("concurrency.lua"))

// Lease is one slot of a concurrency limit, held from Acquire until Release
// or until it expires. A Lease is a plain value; keep it to release it.
type Lease struct {
	// Key is the limit's key.
	Key string
	// ID tells this lease from the others on Key.
	ID string
	// TTL is how long the lease lasts from its last Acquire or Renew.
	TTL time.Duration
}

// ErrLeaseLost is returned by Renew when the lease has expired or was never
// held: its slot may belong to someone else now.
var ErrLeaseLost = errors.New("redisstore: lease expired or not held")

// Acquire takes one of max slots of key's concurrency limit for ttl, across
// every server that shares the Redis. ok is false when all slots are held;
// retryAfter then says when the earliest lease expires. A holder that
// crashes loses its slot when its lease expires; one that runs longer than
// ttl must Renew.
func (s *Store) Acquire(ctx context.Context, key string, max int, ttl time.Duration) (lease Lease, ok bool, retryAfter time.Duration, err error) {
	if err := checkConcurrency(key, max, ttl); err != nil {
		return Lease{}, false, 0, err
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Lease{}, false, 0, fmt.Errorf("redisstore: lease id: %w", err)
	}
	lease = Lease{Key: key, ID: hex.EncodeToString(b[:]), TTL: ttl}
	r, err := s.lease(ctx, "acquire", lease, max)
	if err != nil {
		return Lease{}, false, 0, err
	}
	if !r.Allowed {
		return Lease{}, false, r.RetryAfter, nil
	}
	return lease, true, 0, nil
}

// Release gives the lease's slot back. Releasing a lease that has expired
// or was released already is not an error.
func (s *Store) Release(ctx context.Context, lease Lease) error {
	_, err := s.lease(ctx, "release", lease, 1)
	return err
}

// Renew extends the lease by its TTL from now, or returns ErrLeaseLost.
func (s *Store) Renew(ctx context.Context, lease Lease) error {
	r, err := s.lease(ctx, "renew", lease, 1)
	if err != nil {
		return err
	}
	if !r.Allowed {
		return ErrLeaseLost
	}
	return nil
}

func (s *Store) lease(ctx context.Context, mode string, l Lease, max int) (sluice.Result, error) {
	if err := checkConcurrency(l.Key, max, l.TTL); err != nil {
		return sluice.Result{}, err
	}
	ttl := int64((l.TTL + time.Microsecond - 1) / time.Microsecond)
	args := []string{mode, s.nowArg(), strconv.Itoa(max), strconv.FormatInt(ttl, 10), l.ID}
	parts := s.keyParts("cc", l.Key)
	return decode(execOnKey(ctx, s.client, concurrencyScript, args, parts[:]...))
}

// checkConcurrency validates a concurrency limit's input.
func checkConcurrency(key string, max int, ttl time.Duration) error {
	switch {
	case len(key) == 0 || len(key) > sluice.MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes (want 1 to %d)", sluice.ErrInvalidKey, len(key), sluice.MaxKeyLen)
	case max < 1 || max > sluice.MaxRate:
		return fmt.Errorf("%w: concurrency limit %d must be between 1 and %d", sluice.ErrInvalidLimit, max, sluice.MaxRate)
	case ttl < time.Microsecond || ttl > sluice.MaxPeriod:
		return fmt.Errorf("%w: lease TTL %v must be between 1µs and %v", sluice.ErrInvalidLimit, ttl, sluice.MaxPeriod)
	}
	return nil
}
