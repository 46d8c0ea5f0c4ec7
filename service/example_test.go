package service_test

import (
	"context"
	"fmt"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// oneRule is a service.Rules with a single rule for descriptors
// [(database, users)] in the domain mongo_cps; in production, a loaded
// *config.Config plays this part.
type oneRule struct{ rl *config.RateLimit }

func (o oneRule) Lookup(domain string, entries []config.Entry) *config.RateLimit {
	if domain == "mongo_cps" && len(entries) == 1 && entries[0] == (config.Entry{Key: "database", Value: "users"}) {
		return o.rl
	}
	return nil
}

// stillClock is a sluice.Clock that stands still.
type stillClock struct{ t time.Time }

func (c stillClock) Now() time.Time { return c.t }

func Example() {
	// A clock that stands still, so that the output is the same on every
	// run; leave Config.Clock nil in production.
	store := memstore.New(memstore.Config{Clock: stillClock{time.Unix(1700000000, 0)}})
	defer store.Close()

	rule := &config.RateLimit{
		FullKey: "mongo_cps.database_users", Name: "users",
		Unit: config.Second, RequestsPerUnit: 2,
		Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 2, Period: time.Second},
	}
	svc, err := service.New(service.Config{
		Limiter: store,
		Rules:   oneRule{rule},
		Headers: service.HeadersDraft11,
	})
	if err != nil {
		panic(err)
	}

	req := &pb.RateLimitRequest{
		Domain: "mongo_cps",
		Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "database", Value: "users"}},
		}},
	}
	for range 3 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err) // a bad request or a failing store, never a denial
		}
		st := resp.GetStatuses()[0]
		fmt.Println(resp.GetOverallCode(), st.GetLimitRemaining(), st.GetDurationUntilReset().AsDuration())
		for _, h := range resp.GetResponseHeadersToAdd() {
			fmt.Printf("  %s: %s\n", h.GetKey(), h.GetValue())
		}
	}
	// Output:
	// OK 1 1s
	//   RateLimit-Policy: "users";q=2;w=1
	//   RateLimit: "users";r=1;t=1
	// OK 0 1s
	//   RateLimit-Policy: "users";q=2;w=1
	//   RateLimit: "users";r=0;t=1
	// OVER_LIMIT 0 1s
	//   RateLimit-Policy: "users";q=2;w=1
	//   RateLimit: "users";r=0;t=1
	//   Retry-After: 1
}
