package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Charger = (*Store)(nil)

// ChargeN spends cost units of key's allowance under lim without refusing
// them, into debt if need be (see sluice.Charger), and returns the key's
// state afterwards, in one round trip: the algorithm's script in its
// "charge" mode. It serves TokenBucket, FixedWindow and SlidingWindow in
// Sluice's own key layout; for another algorithm, a calendar window or a
// counter kept in envoyproxy/ratelimit's layout the error wraps
// sluice.ErrInvalidLimit.
func (s *Store) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := sluice.CheckCharge(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	switch {
	case lim.Algorithm != sluice.TokenBucket && lim.Algorithm != sluice.FixedWindow && lim.Algorithm != sluice.SlidingWindow:
		return sluice.Result{}, fmt.Errorf("%w: %v cannot carry a debt (ChargeN serves token_bucket, fixed_window and sliding_window)", sluice.ErrInvalidLimit, lim.Algorithm)
	case lim.Calendar.Unit != sluice.NoCalendar:
		return sluice.Result{}, fmt.Errorf("%w: redisstore cannot carry a debt on a calendar window", sluice.ErrInvalidLimit)
	case lim.Buckets > 1:
		return sluice.Result{}, fmt.Errorf("%w: sliding_window with buckets cannot carry a debt (ChargeN serves it with one bucket)", sluice.ErrInvalidLimit)
	case lim.Moments > 0:
		return sluice.Result{}, fmt.Errorf("%w: sliding_window with moments cannot carry a debt (ChargeN serves it without)", sluice.ErrInvalidLimit)
	case s.sharesEnvoyLayout(lim):
		return sluice.Result{}, fmt.Errorf("%w: redisstore cannot carry a debt on a counter in envoyproxy/ratelimit's layout", sluice.ErrInvalidLimit)
	}
	// The scripts cap what they add at twice the capacity; so does this,
	// so that the cost fits the script's exact integers.
	return s.exec(ctx, "charge", key, lim, min(cost, 2*lim.Capacity()))
}
