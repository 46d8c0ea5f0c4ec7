package redisstore

import (
	"context"
	"time"

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

// RunScript runs a script body through the store's reply decoding, to test
// replies of unexpected shapes.
func RunScript(ctx context.Context, s *Store, body string) (sluice.Result, error) {
	return decode(s.client.Do(ctx, s.client.B().Eval().Script(body).Numkeys(0).Build()))
}

// SetGuessClock makes s guess the window start of the envoy key format
// from now instead of the host's clock, to test a host whose clock is off.
func SetGuessClock(s *Store, now func() time.Time) { s.guessNow = now }

// OpenLazyWithClock is OpenLazy whose stores' scripts take the time from
// clock, as NewWithClock's, so that the conformance suite can run on a
// Lazy store.
func OpenLazyWithClock(ctx context.Context, cfg Config, clock sluice.Clock) (*Lazy, error) {
	return openLazy(ctx, cfg, nil, func(ctx context.Context, cfg Config) (*Store, error) {
		return NewWithClock(ctx, cfg, clock)
	})
}

// LimitKey returns the Redis key of key's state under lim: Key's, or the
// bucketed sliding window's.
func (s *Store) LimitKey(lim sluice.Limit, key string) string {
	return s.key(algorithms[scriptOf(&lim)].short, key)
}

// ScriptText returns the text the store loads for the script file name
// when it runs alone: prelude.lua and the file.
func ScriptText(name string) string { return scriptText(name) }
