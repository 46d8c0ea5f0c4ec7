package main

import (
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/redisstore"
)

// checkRulesForStore returns an error for the first rule of c that the
// store cannot serve (see sluice.LimitValidator), a *config.Error with the
// rule's file and line, so that a config that loads never fails on every
// request instead. v nil checks nothing (the store serves every valid
// limit). Unlimited and blocking (requests_per_unit 0) rules never reach
// the store and are not checked.
func checkRulesForStore(c *config.Config, v func(sluice.Limit) error) error {
	if v == nil {
		return nil
	}
	for r := range c.RateLimits() {
		if r.Unlimited || r.RequestsPerUnit == 0 {
			continue
		}
		if err := v(r.Limit); err != nil {
			return &config.Error{File: r.File, Line: r.Line, Msg: fmt.Sprintf("rule %s: %v: the store cannot serve this limit; every request would fail", r.FullKey, err), Err: err}
		}
	}
	return nil
}

// storeValidator returns the check of the limits the store named by -store
// serves, the one place serve and check decide it, with no connection: for
// PostgreSQL (isPostgres), pgstore.ValidateLimit, which refuses every
// algorithm but fixed_window; for Redis, redisstore.ValidateLimit; for
// memory, every valid limit. Only PostgreSQL keeps a ledger, so the others
// also refuse a billable rule (billable: true), which they could not act on.
func storeValidator(store string) func(sluice.Limit) error {
	switch {
	case isMemory(store):
		return noLedger("the memory store", nil)
	case isPostgres(store):
		return pgstore.ValidateLimit
	default:
		return noLedger("Redis", redisstore.ValidateLimit)
	}
}

// noLedger returns v (nil: no check) refusing, first, a billable limit,
// which store keeps no ledger for.
func noLedger(store string, v func(sluice.Limit) error) func(sluice.Limit) error {
	return func(lim sluice.Limit) error {
		if lim.Billable {
			return fmt.Errorf("billable: %s keeps no ledger of past periods (only a PostgreSQL -store does)", store)
		}
		if v == nil {
			return nil
		}
		return v(lim)
	}
}
