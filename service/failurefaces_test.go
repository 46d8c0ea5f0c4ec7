package service_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/service"
)

// TestFailureModeAnswerOnEachFace holds serve's faces to the table of
// docs/serve.md, "Failure modes": while the store fails, a rule's failure
// mode answers on gRPC (the overall code), POST /json (the status) and
// forward auth (the status) alike. open admits; closed refuses as a limit
// does (OVER_LIMIT, 429, with Retry-After), not with an error, which Envoy
// would admit unless failure_mode_deny; local decides on the process's
// share (2 per minute per client here, 1 process): two admitted, the third
// refused.
func TestFailureModeAnswerOnEachFace(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		mode failsafe.Mode
		want string // three calls on one key
	}{
		{failsafe.Open, "OK/200/200 OK/200/200 OK/200/200"},
		{failsafe.Closed, "OVER_LIMIT/429/429 OVER_LIMIT/429/429 OVER_LIMIT/429/429"},
		{failsafe.Local, "OK/200/200 OK/200/200 OVER_LIMIT/429/429"},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth(), Limiter: failing{},
				Failure: &service.FailurePolicy{Mode: c.mode, Local: newLocal(t, nil), Backoff: time.Hour}})
			var got []string
			for i := range 3 {
				// Each face its own client, so that each sees the
				// mode's first, second and third answer for its key.
				req := request("edge", 0, desc("remote_address", "198.51.100.1"))
				gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				resp, err := h.grpc.ShouldRateLimit(gctx, req)
				cancel()
				if err != nil {
					t.Fatalf("gRPC call %d: %v, want an answer, not an error", i+1, err)
				}
				jresp, body := h.postJSON(request("edge", 0, desc("remote_address", "198.51.100.2")))
				rec := auth(h, "GET", "10.0.0.2:1", traefik("198.51.100.3", "GET", "/"))
				if (jresp.StatusCode == http.StatusTooManyRequests) != strings.Contains(string(body), "OVER_LIMIT") {
					t.Errorf("/json %d with body %s", jresp.StatusCode, body)
				}
				if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
					t.Errorf("/auth 429 without Retry-After: %v", rec.Header())
				}
				got = append(got, fmt.Sprintf("%v/%d/%d", resp.GetOverallCode(), jresp.StatusCode, rec.Code))
			}
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("failure mode %v, gRPC/json/auth: %s, want %s", c.mode, s, c.want)
			}
		})
	}
}
