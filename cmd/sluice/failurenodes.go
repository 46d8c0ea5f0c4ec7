package main

import (
	"flag"
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/failsafe"

	"github.com/sluicehq/sluice/service"
)

// defaultFailureMode is -failure-mode's default on serve and proxy with
// Redis: local, a bounded local limit (each process decides its share of
// each limit in memory while the store fails), not open, which admits
// everything while the store is slow or down (PostgreSQL's quotas keep
// closed unless -failure-mode is given).
const defaultFailureMode = "local"

// maxFailureNodes bounds -failure-nodes: a share of a limit split over
// more processes would round to the minimum of 1 for any limit a person
// writes.
const maxFailureNodes = 10_000

// failureNodesFlag defines -failure-nodes on fs, into n.
func failureNodesFlag(fs *flag.FlagSet, n *int) {
	fs.IntVar(n, "failure-nodes", 0,
		"with failure mode local, N: the number of processes sharing the store; while it fails each decides 1/N of each limit (rate and burst rounded down, at least 1) in memory; 0: -local-share's N when set, else 1 (each process the whole limit)")
}

// checkFailureNodes refuses a -failure-nodes out of its range.
func checkFailureNodes(n int) error {
	if n < 0 || n > maxFailureNodes {
		return fmt.Errorf("-failure-nodes %d: want 0 (the default) or 1 to %d", n, maxFailureNodes)
	}
	return nil
}

// withFailureNodes sets p's Nodes, the processes a local share splits a
// limit over: n, else fallback (such as -local-share's N) when positive;
// and its partitions, service.DefaultPartitions. A nil p (the memory
// store) is left as it is.
func withFailureNodes(p *service.FailurePolicy, n, fallback int) {
	if p == nil {
		return
	}
	switch {
	case n > 0:
		p.Nodes = n
	case fallback > 0:
		p.Nodes = fallback
	}
	if p.Partitions == 0 {
		p.Partitions = service.DefaultPartitions
	}
}

// logFailurePolicy states, in one start-up line, what answers while the
// store fails: the default failure mode, the decision deadline, the
// processes a local share splits a limit over and the breaker's
// partitions; with mode local and one process, that each process then
// admits the whole limit.
func logFailurePolicy(log *slog.Logger, p *service.FailurePolicy) {
	if p == nil {
		return
	}
	attrs := []any{"failure_mode", p.Mode.String(), "store_timeout", p.Timeout,
		"failure_nodes", max(p.Nodes, 1), "breaker_partitions", p.Partitions}
	if p.Mode == failsafe.Local && p.Nodes <= 1 {
		attrs = append(attrs, "note", "while the store fails each process admits the whole limit: set -failure-nodes to the number of processes")
	}
	log.Info("store failure policy", attrs...)
}
