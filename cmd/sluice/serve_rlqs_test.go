package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

const rlqsServeYAML = `domain: edge
rlqs:
  assignment_ttl: 7s
descriptors:
  - key: api
    rate_limit: {unit: second, requests_per_unit: 50}
`

// serve answers RLQS on its gRPC port with the config's rules and its
// rlqs section, follows a reload, and on SIGTERM ends the stream with
// Unavailable after assignments that expire at once.
func TestServeAnswersRLQSOnItsGRPCPort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "edge.yaml")
	writeFile(t, path, rlqsServeYAML)
	s := launch(t, "-config", path)
	addr := s.grpc
	cc := dial(t, addr, insecure.NewCredentials())
	defer cc.Close()
	st, err := rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	report := func(domain, value string) *rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction {
		t.Helper()
		err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"api": value}}, TimeElapsed: durationpb.New(0), NumRequestsAllowed: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return m.GetBucketAction()[0].GetQuotaAssignmentAction()
	}
	rate := func(qa *rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction) float64 {
		tb := qa.GetRateLimitStrategy().GetTokenBucket()
		return float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
	}
	qa := report("edge", "v1")
	if rate(qa) != 50 || qa.GetAssignmentTimeToLive().AsDuration() != 7*time.Second {
		t.Fatalf("assignment %v, want 50 tokens a second for 7s", qa)
	}
	// A reload applies to buckets subscribed after it.
	writeFile(t, path, regexp.MustCompile(`50`).ReplaceAllString(rlqsServeYAML, "80"))
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if qa := report("", "v"+time.Now().String()); rate(qa) == 80 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("after 10 s a new bucket still has the old rule")
		}
	}
	s.cancel()
	for {
		m, err := st.Recv()
		if err != nil {
			if grpcstatus.Code(err) != codes.Unavailable {
				t.Errorf("the stream ended with %v at shutdown, want Unavailable", err)
			}
			return
		}
		if d := m.GetBucketAction()[0].GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); d != 0 {
			t.Errorf("an assignment at shutdown has TTL %v, want 0", d)
		}
	}
}

// An RLQS stream is long-lived: the per-call deadline of
// -grpc-request-timeout does not cut it while it reports (docs/rlqs.md
// promises a cut only after -rlqs-idle-timeout without a report), and
// it keeps its assignment: the rule's 50 a second for the config's 7 s,
// in every answer of the stream's second past five request timeouts.
func TestRLQSStreamOutlivesTheGRPCRequestTimeout(t *testing.T) {
	t.Parallel() // waits on serve and timers; touches no process-wide state
	dir := t.TempDir()
	path := filepath.Join(dir, "edge.yaml")
	writeFile(t, path, rlqsServeYAML)
	s := launch(t, "-config", path, "-grpc-request-timeout", "200ms")
	cc := dial(t, s.grpc, insecure.NewCredentials())
	defer cc.Close()
	st, err := rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; time.Since(start) < time.Second; i++ {
		err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"api": "v1"}}, TimeElapsed: durationpb.New(50 * time.Millisecond), NumRequestsAllowed: 1}}})
		var m *rlqspb.RateLimitQuotaResponse
		if err == nil || errors.Is(err, io.EOF) {
			m, err = st.Recv() // a refused Send's status comes with Recv
		}
		if err != nil {
			t.Fatalf("report %d, %v after the stream opened: %v; want the stream alive past the 200ms request timeout", i, time.Since(start).Round(time.Millisecond), err)
		}
		qa := m.GetBucketAction()[0].GetQuotaAssignmentAction()
		tb := qa.GetRateLimitStrategy().GetTokenBucket()
		if rate := float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds(); rate != 50 || qa.GetAssignmentTimeToLive().AsDuration() != 7*time.Second {
			t.Fatalf("report %d, %v after the stream opened: assignment %v, want 50 tokens a second for 7s", i, time.Since(start).Round(time.Millisecond), qa)
		}
		<-tick.C
	}
}

// serve's RLQS flags act: a second stream on a connection capped at one
// is refused with ResourceExhausted, a silent stream ends after
// -rlqs-idle-timeout, and /metrics shows the -rlqs-max-bytes budget.
func TestServeRLQSFlagsBoundStreams(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "edge.yaml")
	writeFile(t, path, rlqsServeYAML)
	s := launch(t, "-config", path, "-rlqs-max-streams-per-conn", "1", "-rlqs-idle-timeout", "300ms", "-rlqs-max-bytes", "2m")
	cc := dial(t, s.grpc, insecure.NewCredentials())
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	msg := &rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqspb.BucketId{Bucket: map[string]string{"api": "v1"}}, TimeElapsed: durationpb.New(0), NumRequestsAllowed: 1}}}
	open := func() (grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse], error) {
		st, err := rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
		if err != nil {
			return nil, err
		}
		_ = st.Send(msg) // a refused stream's status comes with Recv
		_, err = st.Recv()
		return st, err
	}
	first, err := open()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := open(); grpcstatus.Code(err) != codes.ResourceExhausted {
		t.Errorf("a second stream on the connection (cap 1): %v, want ResourceExhausted", err)
	}
	for err == nil {
		_, err = first.Recv()
	}
	if grpcstatus.Code(err) != codes.DeadlineExceeded || time.Since(start) > 5*time.Second {
		t.Errorf("a silent stream ended with %v after %v, want DeadlineExceeded after -rlqs-idle-timeout 300ms", err, time.Since(start))
	}
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "sluice_rlqs_memory_max_bytes 2.097152e+06") {
		t.Errorf("/metrics has no sluice_rlqs_memory_max_bytes of 2m:\n%s", body)
	}
}
