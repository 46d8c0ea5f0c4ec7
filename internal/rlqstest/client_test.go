package rlqstest_test

import (
	"testing"
	"testing/synctest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/rlqstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var id = map[string]string{"k": "v"}

func tokens(max, per uint32, every time.Duration) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: max, TokensPerFill: wrapperspb.UInt32(per), FillInterval: durationpb.New(every)}}}
}

func action(s *typev3.RateLimitStrategy, ttl *durationpb.Duration) *rlqspb.RateLimitQuotaResponse {
	return &rlqspb.RateLimitQuotaResponse{BucketAction: []*rlqspb.RateLimitQuotaResponse_BucketAction{{
		BucketId: &rlqspb.BucketId{Bucket: id},
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: ttl, RateLimitStrategy: s}}}}}
}

// scripted is a server that records reports and sends what the test puts
// on out.
type scripted struct {
	reports chan *rlqspb.RateLimitQuotaUsageReports
	out     chan *rlqspb.RateLimitQuotaResponse
}

func (s *scripted) handle(st grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]) error {
	go func() {
		for m := range s.out {
			if st.Send(m) != nil {
				return
			}
		}
	}()
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		select {
		case s.reports <- m:
		default: // the test reads the first ones only
		}
	}
}

func start(t *testing.T, set rlqstest.Settings) (*rlqstest.Client, *scripted) {
	s := &scripted{reports: make(chan *rlqspb.RateLimitQuotaUsageReports, 100), out: make(chan *rlqspb.RateLimitQuotaResponse)}
	c := rlqstest.New(set, func() (rlqstest.Conn, error) { return rlqstest.Pipe(t.Context(), nil, s.handle), nil })
	t.Cleanup(func() { close(s.out) })
	return c, s
}

// A new bucket is reported at once with its first request and 0s elapsed,
// the domain only in the stream's first message, then every interval
// with the counts since the last report.
func TestTheClientReportsANewBucketAtOnceThenEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := start(t, rlqstest.Settings{Domain: "d", ReportingInterval: 2 * time.Second})
		defer c.Close()
		c.Request(id)
		synctest.Wait()
		m := <-s.reports
		u := m.GetBucketQuotaUsages()[0]
		if m.GetDomain() != "d" || u.GetNumRequestsAllowed() != 1 || u.GetTimeElapsed().AsDuration() != 0 {
			t.Fatalf("first report %v", m)
		}
		c.Request(id)
		c.Request(id)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		m = <-s.reports
		u = m.GetBucketQuotaUsages()[0]
		if m.GetDomain() != "" || u.GetNumRequestsAllowed() != 2 || u.GetTimeElapsed().AsDuration() != 2*time.Second {
			t.Fatalf("second report %v", m)
		}
	})
}

// Before an assignment the no_assignment_behavior decides; a token bucket
// starts full; the same strategy again only extends its TTL (tokens
// kept); another one keeps the fraction of tokens left; an expired one
// falls back, then goes back to no assignment; abandon erases the bucket.
func TestTheClientAppliesAssignmentsAsTheFilterDocuments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deny := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
		c, s := start(t, rlqstest.Settings{Domain: "d", NoAssignment: deny, ExpiredFallback: deny, ExpiredTimeout: 3 * time.Second})
		defer c.Close()
		if c.Request(id) {
			t.Fatal("admitted before any assignment, want no_assignment_behavior (deny)")
		}
		s.out <- action(tokens(4, 1, time.Hour), durationpb.New(10*time.Second))
		synctest.Wait()
		admitted := 0
		for range 10 {
			if c.Request(id) {
				admitted++
			}
		}
		if admitted != 4 {
			t.Fatalf("a new bucket of 4 admitted %d, want 4 (it starts full)", admitted)
		}
		s.out <- action(tokens(4, 1, time.Hour), durationpb.New(10*time.Second))
		synctest.Wait()
		if c.Request(id) {
			t.Fatal("the same strategy again refilled the bucket, want it kept")
		}
		s.out <- action(tokens(8, 8, time.Second), durationpb.New(5*time.Second))
		synctest.Wait()
		if c.Request(id) {
			t.Fatal("a changed bucket started full, want the old fraction (0) of tokens")
		}
		time.Sleep(6 * time.Second) // expired: the fallback (deny) for 3 s
		if c.Request(id) {
			t.Fatal("admitted after the TTL, want expired_assignment_behavior (deny)")
		}
		time.Sleep(3 * time.Second) // then no assignment: deny here too
		if ok := c.Request(id); ok || c.Rate(id) != 0 {
			t.Fatalf("after the fallback: admitted %v, rate %v; want no assignment (deny)", ok, c.Rate(id))
		}
		s.out <- &rlqspb.RateLimitQuotaResponse{BucketAction: []*rlqspb.RateLimitQuotaResponse_BucketAction{{
			BucketId:     &rlqspb.BucketId{Bucket: id},
			BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}}}}}
		synctest.Wait()
		if c.Buckets() != 0 || c.Abandoned() != 1 {
			t.Errorf("after abandon: %d buckets, %d abandoned", c.Buckets(), c.Abandoned())
		}
		// An unset TTL never expires; an unset strategy allows all.
		c.Request(id)
		s.out <- action(nil, nil)
		synctest.Wait()
		time.Sleep(time.Hour)
		if !c.Request(id) {
			t.Error("an assignment with no strategy and no TTL denied a request an hour later, want allow")
		}
	})
}
