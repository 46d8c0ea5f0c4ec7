package redisstore

import (
	"context"

	"github.com/sluicehq/sluice"
)

// NewWithClock is New for tests: the scripts take the time from clock instead
// of the server's TIME, so the conformance suite can move time by hand.
func NewWithClock(ctx context.Context, cfg Config, clock sluice.Clock) (*Store, error) {
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.clock = clock
	return s, nil
}
