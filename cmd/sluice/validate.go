package main

import (
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
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
