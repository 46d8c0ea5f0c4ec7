package main

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
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
