package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/redistest"
)

// checkOnlyCfg is a 7 per minute rule on domain "d", key "k".
const checkOnlyCfg = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 7\n"

// TestServeCheckOnlyDescriptorReportsRemainingAndReset: through sluice serve's
// HTTP face, on the memory store and on a real Redis, a descriptor with
// hits_addend 0 after 2 hits on a 7/minute key answers OK with
// limit_remaining 5 and a duration_until_reset within the minute, and spends
// nothing (the next hit leaves 4).
func TestServeCheckOnlyDescriptorReportsRemainingAndReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, path, checkOnlyCfg)
	for _, store := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"memory", func(*testing.T) []string { return nil }},
		{"redis", func(t *testing.T) []string { return []string{"-store", "redis://" + redistest.Single(t).Addr} }},
	} {
		t.Run(store.name, func(t *testing.T) {
			s := launch(t, append([]string{"-config", path}, store.args(t)...)...)
			warmUntilStoreDecides(t, s.url)
			checkOnlyAfterTwoHits(t, s.url, store.name)
		})
	}
}

// warmUntilStoreDecides hits a warm-up key of the 7/minute rule until it
// is refused, which only the store does (the failure mode, open, admits):
// the first decisions on a Redis that serve has just connected to load its
// scripts, and under load they can outlast the decision deadline and be
// answered by the failure mode, which would count nothing.
func warmUntilStoreDecides(t *testing.T, url string) {
	t.Helper()
	warm := fmt.Sprintf(`{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"warm-%d"}]}]}`, time.Now().UnixNano())
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if rlsPost(t, url, warm).GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT {
			return
		}
	}
	t.Fatal("the store never refused the warm-up key within 10s: decisions are answered by the failure mode")
}

// checkOnlyAfterTwoHits spends 2 hits of a fresh key, checks it, then hits
// it once more. The rule is a fixed window on the wall clock: when a minute
// boundary falls between the first hit and the last, the key starts afresh
// mid-way, and the sequence is run again on another key.
func checkOnlyAfterTwoHits(t *testing.T, url, store string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		value := fmt.Sprintf("%s-%d-%d", store, time.Now().UnixNano(), attempt)
		hit := `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"` + value + `"}]}]}`
		check := `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"` + value + `"}],"hits_addend":0}]}`
		start := time.Now().Truncate(time.Minute)
		rlsPost(t, url, hit)
		rlsPost(t, url, hit)
		checked := rlsPost(t, url, check)
		after := rlsPost(t, url, hit)
		if !time.Now().Truncate(time.Minute).Equal(start) {
			if attempt < 2 {
				continue
			}
			t.Fatal("three attempts each crossed a minute boundary")
		}
		if checked.GetOverallCode() != pb.RateLimitResponse_OK || len(checked.GetStatuses()) != 1 {
			t.Fatalf("check: %v, want OK with one status", checked)
		}
		st := checked.GetStatuses()[0]
		if st.GetCode() != pb.RateLimitResponse_OK || st.GetLimitRemaining() != 5 {
			t.Errorf("check after 2 hits of 7/minute: %v remaining %d, want OK remaining 5", st.GetCode(), st.GetLimitRemaining())
		}
		if d := st.GetDurationUntilReset().AsDuration(); st.GetDurationUntilReset() == nil || d <= 0 || d > time.Minute {
			t.Errorf("check: duration_until_reset %v, want in (0, 1m]", st.GetDurationUntilReset())
		}
		if got := after.GetStatuses()[0].GetLimitRemaining(); got != 4 {
			t.Errorf("a hit after the check: remaining %d, want 4 (the check spent nothing)", got)
		}
		return
	}
}

// rlsPost POSTs a RateLimitRequest in protojson to serve's /json and
// decodes the response, failing the test unless it is a 200 or a 429.
func rlsPost(t *testing.T, url, body string) *pb.RateLimitResponse {
	t.Helper()
	resp, b := call(t, http.MethodPost, url+"/json", body, map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("POST /json: %d %s", resp.StatusCode, b)
	}
	var out pb.RateLimitResponse
	if err := protojson.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST /json: %v in %s", err, b)
	}
	return &out
}
