package rlqs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/rlqstest"
	"github.com/sluicehq/sluice/rlqs"
)

func usage(id map[string]string, elapsed time.Duration, allowed, denied uint64) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: id},
		TimeElapsed: durationpb.New(elapsed), NumRequestsAllowed: allowed, NumRequestsDenied: denied}
}

// endsWith sends msgs and wants the stream to end with code.
func endsWith(t *testing.T, code codes.Code, msgs ...*rlqspb.RateLimitQuotaUsageReports) {
	t.Helper()
	s := newServer(t, nil)
	conn := rlqstest.Pipe(t.Context(), nil, s.StreamRateLimitQuotas)
	for _, m := range msgs {
		if err := conn.Send(m); err != nil {
			break
		}
	}
	var err error
	for err == nil {
		_, err = conn.Recv()
	}
	if status.Code(err) != code {
		t.Fatalf("the stream ended with %v, want %v", err, code)
	}
	t.Logf("stream status: %v", err)
}

func TestAFirstMessageWithoutADomainEndsTheStreamInvalidArgument(t *testing.T) {
	endsWith(t, codes.InvalidArgument, &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(apiBucket, 0, 1, 0)}})
}

func TestALongDomainEndsTheStreamInvalidArgument(t *testing.T) {
	endsWith(t, codes.InvalidArgument, &rlqspb.RateLimitQuotaUsageReports{Domain: strings.Repeat("d", 257), BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(apiBucket, 0, 1, 0)}})
}

func TestADomainChangeEndsTheStreamInvalidArgument(t *testing.T) {
	endsWith(t, codes.InvalidArgument,
		&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(apiBucket, 0, 1, 0)}},
		&rlqspb.RateLimitQuotaUsageReports{Domain: "other", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(apiBucket, 0, 1, 0)}})
}

func TestMalformedReportsEndTheStreamInvalidArgument(t *testing.T) {
	long := string(make([]byte, 300))
	for name, u := range map[string]*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		"no bucket id":     {TimeElapsed: durationpb.New(time.Second)},
		"empty bucket id":  usage(map[string]string{}, time.Second, 1, 0),
		"empty key":        usage(map[string]string{"": "v"}, time.Second, 1, 0),
		"empty value":      usage(map[string]string{"api": ""}, time.Second, 1, 0),
		"long value":       usage(map[string]string{"api": long}, time.Second, 1, 0),
		"negative elapsed": usage(apiBucket, -time.Second, 1, 0),
		"nine pairs":       usage(map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "e": "1", "f": "1", "g": "1", "h": "1", "i": "1"}, time.Second, 1, 0),
	} {
		t.Run(name, func(t *testing.T) {
			endsWith(t, codes.InvalidArgument, &rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{u}})
		})
	}
}

func TestAStreamThatNeverReportsEndsDeadlineExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		endsWith(t, codes.DeadlineExceeded)
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("ended after %v, want the 30 s default", d)
		}
	})
}

// firstAction sends one report of id and returns the action for it.
func firstAction(t *testing.T, domain string, id map[string]string) *rlqspb.RateLimitQuotaResponse_BucketAction {
	t.Helper()
	s := newServer(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	conn := rlqstest.Pipe(ctx, nil, s.StreamRateLimitQuotas)
	if err := conn.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(id, 0, 1, 0)}}); err != nil {
		t.Fatal(err)
	}
	m, err := conn.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.GetBucketAction()) != 1 {
		t.Fatalf("got %v, want one action", m)
	}
	_ = conn.CloseSend()
	for err == nil {
		_, err = conn.Recv()
	}
	return m.GetBucketAction()[0]
}

func TestBucketsAndTheirStrategies(t *testing.T) {
	for _, tc := range []struct {
		name, domain string
		id           map[string]string
		want         typev3.RateLimitStrategy_BlanketRule
		bucket       bool
	}{
		{"a bucket no rule matches is allowed", "edge", map[string]string{"nope": "x"}, typev3.RateLimitStrategy_ALLOW_ALL, false},
		{"an unknown domain is allowed", "nowhere", apiBucket, typev3.RateLimitStrategy_ALLOW_ALL, false},
		{"an unlimited rule is allowed", "edge", map[string]string{"open": "x"}, typev3.RateLimitStrategy_ALLOW_ALL, false},
		{"a rule of 0 requests denies", "edge", map[string]string{"blocked": "x"}, typev3.RateLimitStrategy_DENY_ALL, false},
		{"a limited rule is a token bucket", "edge", apiBucket, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := firstAction(t, tc.domain, tc.id)
			qa := a.GetQuotaAssignmentAction()
			if qa.GetAssignmentTimeToLive().AsDuration() != 20*time.Second {
				t.Errorf("TTL %v, want the domain's 20s", qa.GetAssignmentTimeToLive().AsDuration())
			}
			s := qa.GetRateLimitStrategy()
			if tc.bucket {
				tb := s.GetTokenBucket()
				if tb == nil || tb.GetTokensPerFill().GetValue() != 100 || tb.GetFillInterval().AsDuration() != time.Second || tb.GetMaxTokens() != 100 {
					t.Errorf("strategy %v, want the whole limit (alone): 100 tokens a second, 100 at most", s)
				}
				return
			}
			if s.GetStrategy() == nil || s.GetBlanketRule() != tc.want {
				t.Errorf("strategy %v, want %v", s, tc.want)
			}
		})
	}
}

func TestAnIdleBucketIsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, nil)
		f := newFleet(t.Context(), 1, func(int) *rlqs.Server { return s })
		defer f.close()
		c := f.clients[0]
		c.Request(apiBucket)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if c.Buckets() != 1 {
			t.Fatalf("the bucket is gone after 59 s idle, want it kept until abandon_after (60s)")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if c.Buckets() != 0 || c.Abandoned() != 1 {
			t.Errorf("after 61 s idle: %d buckets, %d abandoned; want the bucket abandoned", c.Buckets(), c.Abandoned())
		}
		// The next request starts over, with a new assignment.
		c.Request(apiBucket)
		synctest.Wait()
		if st, _ := c.Strategy(apiBucket); st.GetTokenBucket() == nil {
			t.Errorf("a request after the abandon got %v, want a new token bucket", st)
		}
		shutdown(t, s)
	})
}

func TestTheClientFallsBackWhenItsAssignmentExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, nil)
		deny := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
		var cur = s
		c := rlqstest.New(rlqstest.Settings{Domain: "edge", ExpiredFallback: deny, ExpiredTimeout: 10 * time.Second}, func() (rlqstest.Conn, error) {
			if cur == nil {
				return nil, errors.New("down")
			}
			return rlqstest.Pipe(t.Context(), nil, cur.StreamRateLimitQuotas), nil
		})
		defer c.Close()
		c.Request(apiBucket)
		synctest.Wait()
		cur = nil
		shutdown(t, s) // TTL 0: the fallback applies at once
		synctest.Wait()
		if c.Request(apiBucket) {
			t.Errorf("a request after the shutdown was admitted, want the expired fallback (deny)")
		}
		time.Sleep(11 * time.Second)
		if !c.Request(apiBucket) {
			t.Errorf("a request after the fallback's timeout was denied, want no-assignment behaviour (allow)")
		}
	})
}
