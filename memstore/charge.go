package memstore

import (
	"context"
	"fmt"
	"hash/maphash"

	"github.com/sluicehq/sluice"
)

var _ sluice.Charger = (*Store)(nil)

// ChargeN spends cost units of key's allowance under lim without refusing
// them, into debt if need be (see sluice.Charger), and returns the key's
// state afterwards. It serves TokenBucket, FixedWindow and SlidingWindow;
// for another algorithm the error wraps sluice.ErrInvalidLimit. It does not
// allocate, but for a key it inserts.
func (s *Store) ChargeN(_ context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := sluice.CheckCharge(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	now := s.now()
	h := maphash.String(s.seed, key)
	return s.shards[h>>s.shift].charge(now, h, key, lim, cost)
}

// charge is decide for ChargeN.
func (sh *shard) charge(now int64, h uint64, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.valid || !sameLimit(&lim, &sh.lim) {
		if err := sh.use(lim); err != nil {
			return sluice.Result{}, err
		}
	}
	switch lim.Algorithm {
	case sluice.TokenBucket:
		return lookup(sh, &sh.tb.table, now, h, key).Charge(now, lim, cost), nil
	case sluice.FixedWindow:
		return lookup(sh, &sh.fw.table, now, h, key).Charge(now, lim, cost), nil
	case sluice.SlidingWindow:
		if lim.Buckets > 1 {
			return sluice.Result{}, fmt.Errorf("%w: sliding_window with buckets cannot carry a debt (ChargeN serves it with one bucket)", sluice.ErrInvalidLimit)
		}
		if lim.Moments > 0 {
			return sluice.Result{}, fmt.Errorf("%w: sliding_window with moments cannot carry a debt (ChargeN serves it without)", sluice.ErrInvalidLimit)
		}
		return lookup(sh, &sh.sw.table, now, h, key).Charge(now, lim, cost), nil
	}
	return sluice.Result{}, errNoDebt(lim.Algorithm)
}

// errNoDebt is ChargeN's error for an algorithm that cannot carry a debt.
func errNoDebt(a sluice.Algorithm) error {
	return fmt.Errorf("%w: %v cannot carry a debt (ChargeN serves token_bucket, fixed_window and sliding_window)", sluice.ErrInvalidLimit, a)
}
