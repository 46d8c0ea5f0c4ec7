package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/service"
)

// Unset, -failure-mode is local on Redis: while the store fails each
// process decides its share of each limit (1/-failure-nodes, else
// 1/-local-share's N, else 1/the fleet's live count, which leases on
// Redis count by default), behind a partitioned breaker; PostgreSQL's
// quotas still fail closed.
func TestServeFailureModeDefaultsToALocalShare(t *testing.T) {
	for _, tt := range []struct {
		name         string
		store        string
		nodes, share int
		wantMode     failsafe.Mode
		wantNodes    int
	}{
		{"redis default", "redis://127.0.0.1:1", 0, 0, failsafe.Local, 0},
		{"redis -failure-nodes 4", "redis://127.0.0.1:1", 4, 0, failsafe.Local, 4},
		{"redis -local-share 3", "redis://127.0.0.1:1", 0, 3, failsafe.Local, 3},
		{"postgres default", "postgres://u:p@127.0.0.1:1/db", 0, 0, failsafe.Closed, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, code, done := parseServeFlags([]string{"-store", tt.store}, &bytes.Buffer{}, &bytes.Buffer{})
			if done {
				t.Fatalf("parse: exit %d", code)
			}
			o := &s.o
			o.failureNodes, o.remote.localShare, o.remote.migrate = tt.nodes, tt.share, false
			var logs testlog.Buffer
			st, err := openServeStore(context.Background(), o, false, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			p := findPolicy(t, st)
			if p.Mode != tt.wantMode || p.Nodes != tt.wantNodes || p.Partitions != service.DefaultPartitions {
				t.Errorf("policy mode %v, nodes %d, partitions %d; want %v, %d, %d",
					p.Mode, p.Nodes, p.Partitions, tt.wantMode, tt.wantNodes, service.DefaultPartitions)
			}
			line := fmt.Sprintf("failure_mode=%v store_timeout=250ms failure_nodes=%d", tt.wantMode, max(tt.wantNodes, 1))
			if tt.name == "redis default" {
				line = `failure_mode=local store_timeout=250ms failure_nodes="the fleet's live count"`
			}
			if !strings.Contains(logs.String(), line) {
				t.Errorf("the start-up lines lack %q:\n%s", line, logs.String())
			}
		})
	}
}

// findPolicy returns st's failure policy, failing the test without one.
func findPolicy(t *testing.T, st stores.Opened) *service.FailurePolicy {
	t.Helper()
	if st.Failure == nil {
		t.Fatal("no failure policy")
	}
	return st.Failure
}

// A -failure-nodes out of its range is exit 2 naming it, in serve and
// proxy.
func TestFailureNodesOutOfRangeIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "-store", "redis://127.0.0.1:1", "-failure-nodes", "-1"},
		{"proxy", "-upstream", "http://127.0.0.1:1", "-failure-nodes", "100000"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-failure-nodes") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming -failure-nodes", args, code, errb.String())
		}
	}
}
