// Command envoy plays the Envoys of the walk-through of docs/rlqs.md: it
// speaks RLQS (StreamRateLimitQuotas) to `sluice serve` as Envoy's
// rate_limit_quota filter does, so that the division of a limit among
// Envoys can be seen without running Envoy.
//
// Each of -envoys streams names itself (the sluice-rlqs-client metadata,
// envoy-1, envoy-2...), subscribes to one bucket (-bucket k=v[,k=v]) of
// -domain with a first report of time_elapsed 0, as Envoy does, then
// reports a demand of -demand requests a second. After -wait it prints,
// per Envoy, the last assignment Sluice sent it for the bucket, and exits.
//
//	go run ./examples/rlqs/envoy -addr localhost:8081 -domain edge -bucket tenant=acme -envoys 2
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

func main() {
	addr := flag.String("addr", "localhost:8081", "sluice serve's gRPC address")
	domain := flag.String("domain", "edge", "the domain of the streams' first message")
	bucket := flag.String("bucket", "tenant=acme", "the bucket id: key=value pairs, comma-separated")
	envoys := flag.Int("envoys", 2, "how many Envoys (streams) report the bucket")
	demand := flag.Uint64("demand", 80, "requests a second each Envoy reports (allowed)")
	wait := flag.Duration("wait", 2*time.Second, "how long to listen for assignments before printing them")
	flag.Parse()
	id := map[string]string{}
	for _, kv := range strings.Split(*bucket, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			log.Fatalf("-bucket %q: want key=value[,key=value]", *bucket)
		}
		id[k] = v
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *wait+10*time.Second)
	defer cancel()

	last := make([]string, *envoys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	streams := make([]grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse], *envoys)
	for i := range *envoys {
		sctx := metadata.AppendToOutgoingContext(ctx, "sluice-rlqs-client", fmt.Sprintf("envoy-%d", i+1))
		st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(sctx)
		if err != nil {
			log.Fatal(err)
		}
		streams[i] = st
		// Envoy's first report of a bucket: its domain, time_elapsed 0.
		if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: *domain, BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: id}, TimeElapsed: durationpb.New(0)}}}); err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := st.Recv()
				if err != nil {
					return
				}
				for _, a := range m.GetBucketAction() {
					mu.Lock()
					last[i] = describe(a)
					mu.Unlock()
				}
			}
		}()
	}
	// A report a second later, as Envoy sends one per interval: the
	// requests each Envoy let through.
	time.Sleep(time.Second)
	for _, st := range streams {
		if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: id}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: *demand}}}); err != nil {
			log.Fatal(err)
		}
	}
	time.Sleep(*wait)
	mu.Lock()
	for i, a := range last {
		if a == "" {
			a = "no assignment"
		}
		fmt.Printf("envoy-%d %s: %s\n", i+1, bucketName(id), a)
	}
	mu.Unlock()
	for _, st := range streams {
		st.CloseSend()
	}
	cancel()
	wg.Wait()
	os.Exit(0)
}

// describe says what a bucket action tells Envoy to do.
func describe(a *rlqspb.RateLimitQuotaResponse_BucketAction) string {
	if a.GetAbandonAction() != nil {
		return "abandoned"
	}
	qa := a.GetQuotaAssignmentAction()
	s := qa.GetRateLimitStrategy()
	ttl := qa.GetAssignmentTimeToLive().AsDuration()
	if tb := s.GetTokenBucket(); tb != nil {
		every := tb.GetFillInterval().AsDuration()
		per := float64(tb.GetTokensPerFill().GetValue()) / every.Seconds()
		return fmt.Sprintf("%.0f requests/s (token bucket: %d tokens every %v, at most %d), for %v",
			per, tb.GetTokensPerFill().GetValue(), every, tb.GetMaxTokens(), ttl)
	}
	return fmt.Sprintf("%v, for %v", s.GetBlanketRule(), ttl)
}

// bucketName writes a bucket id as {k: v, ...}, keys sorted.
func bucketName(id map[string]string) string {
	var keys []string
	for k := range id {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", k, id[k])
	}
	b.WriteString("}")
	return b.String()
}
