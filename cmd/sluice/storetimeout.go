package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/service"
)

// maxStoreTimeout is the longest -store-timeout: a third of the 30 s that
// serve's HTTP listener gives a request and gRPC a call, so that the failure
// mode answers a decision on a hung store before the caller's connection is
// cut without an answer.
const maxStoreTimeout = 10 * time.Second

// storeTimeoutFlag defines -store-timeout on fs, into d: the deadline of
// one decision on a remote store (failsafe.Config.Timeout), after which the
// failure mode answers. 0, the default, keeps the store's own: failsafe's
// each kind's stores.Kind.DecisionTimeout.
func storeTimeoutFlag(fs *flag.FlagSet, d *time.Duration, stores, defaults string) {
	fs.DurationVar(d, "store-timeout", 0,
		"with "+stores+", how long one decision may wait for the store before the failure mode answers (a caller's deadline shortens it to 9/10 of what is left); up to "+maxStoreTimeout.String()+"; 0: "+defaults)
}

// checkStoreTimeout refuses a -store-timeout out of its range: negative,
// or over maxStoreTimeout.
func checkStoreTimeout(d time.Duration) error {
	if d < 0 || d > maxStoreTimeout {
		return fmt.Errorf("-store-timeout %v: want 0 (the store's default) or a positive duration up to %v", d, maxStoreTimeout)
	}
	return nil
}

// withStoreTimeout makes d the deadline of p's calls to the store when d is
// set; 0 keeps p's own (the store's default). A nil p (the memory store,
// which has no failure policy) is left as it is.
func withStoreTimeout(p *service.FailurePolicy, d time.Duration) {
	if p != nil && d > 0 {
		p.Timeout = d
	}
}
