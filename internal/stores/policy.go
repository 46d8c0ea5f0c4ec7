package stores

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/service"
)

// MaxTimeout is the longest -store-timeout: a third of the 30 s that
// serve's HTTP listener gives a request and gRPC a call, so that the failure
// mode answers a decision on a hung store before the caller's connection is
// cut without an answer.
const MaxTimeout = 10 * time.Second

// TimeoutFlag defines -store-timeout on fs, into d: the deadline of
// one decision on a remote store (failsafe.Config.Timeout), after which the
// failure mode answers. 0, the default, keeps the store's own: its
// Kind's DecisionTimeout. kinds names the kinds it applies to and
// defaults their defaults, for the flag's help.
func TimeoutFlag(fs *flag.FlagSet, d *time.Duration, kinds, defaults string) {
	fs.DurationVar(d, "store-timeout", 0,
		"with "+kinds+", how long one decision may wait for the store before the failure mode answers (a caller's deadline shortens it to 9/10 of what is left); up to "+MaxTimeout.String()+"; 0: "+defaults)
}

// CheckTimeout refuses a -store-timeout out of its range: negative,
// or over MaxTimeout.
func CheckTimeout(d time.Duration) error {
	if d < 0 || d > MaxTimeout {
		return fmt.Errorf("-store-timeout %v: want 0 (the store's default) or a positive duration up to %v", d, MaxTimeout)
	}
	return nil
}

// WithTimeout makes d the deadline of p's calls to the store when d is
// set; 0 keeps p's own (the store's default). A nil p (the memory store,
// which has no failure policy) is left as it is.
func WithTimeout(p *service.FailurePolicy, d time.Duration) {
	if p != nil && d > 0 {
		p.Timeout = d
	}
}

// DefaultFailureMode is -failure-mode's default on serve and proxy with
// Redis: local, a bounded local limit (each process decides its share of
// each limit in memory while the store fails), not open, which admits
// everything while the store is slow or down (PostgreSQL's quotas keep
// closed unless -failure-mode is given).
const DefaultFailureMode = "local"

// MaxFailureNodes bounds -failure-nodes: a share of a limit split over
// more processes would round to the minimum of 1 for any limit a person
// writes.
const MaxFailureNodes = 10_000

// FailureNodesFlag defines -failure-nodes on fs, into n.
func FailureNodesFlag(fs *flag.FlagSet, n *int) {
	fs.IntVar(n, "failure-nodes", 0,
		"with failure mode local, N: the number of processes sharing the store; while it fails each decides 1/N of each limit (rate and burst rounded down, at least 1) in memory; 0: -local-share's N when set, else the fleet's live count where it is counted (leases or -local-share auto on Redis), else 1 (each process the whole limit)")
}

// CheckFailureNodes refuses a -failure-nodes out of its range.
func CheckFailureNodes(n int) error {
	if n < 0 || n > MaxFailureNodes {
		return fmt.Errorf("-failure-nodes %d: want 0 (the default) or 1 to %d", n, MaxFailureNodes)
	}
	return nil
}

// WithFailureNodes sets p's Nodes, the processes a local share splits a
// limit over: n, else fallback (such as -local-share's N) when positive;
// and its partitions, service.DefaultPartitions. A nil p (the memory
// store) is left as it is.
func WithFailureNodes(p *service.FailurePolicy, n, fallback int) {
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

// LogFailurePolicy states, in one start-up line, what answers while the
// store fails: the default failure mode, the decision deadline, the
// processes a local share splits a limit over ("the fleet's live count"
// when NodesNow follows it) and the breaker's partitions; with mode local
// and one process, that each process then admits the whole limit.
func LogFailurePolicy(log *slog.Logger, p *service.FailurePolicy) {
	if p == nil {
		return
	}
	var nodes any = max(p.Nodes, 1)
	if p.NodesNow != nil {
		nodes = "the fleet's live count"
	}
	attrs := []any{"failure_mode", p.Mode.String(), "store_timeout", p.Timeout,
		"failure_nodes", nodes, "breaker_partitions", p.Partitions}
	if p.Mode == failsafe.Local && p.Nodes <= 1 && p.NodesNow == nil {
		attrs = append(attrs, "note", "while the store fails each process admits the whole limit: set -failure-nodes to the number of processes")
	}
	log.Info("store failure policy", attrs...)
}
