package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/admin"
)

// fixedOnly is a store that serves fixed windows only, as pgstore does.
type fixedOnly struct{ noPeek }

func (fixedOnly) ValidateLimit(lim sluice.Limit) error {
	if lim.Algorithm != sluice.FixedWindow {
		return fmt.Errorf("%w: fixed_window only, not %v", sluice.ErrInvalidLimit, lim.Algorithm)
	}
	return nil
}

// A plan or override that the store the limits run on cannot serve (a
// token bucket on a fixed-window store such as PostgreSQL) is refused when
// it is written, 400 naming the limit, and never reaches the plans; one it
// serves is accepted.
func TestPlanTheStoreCannotServeIsRefusedAtWrite(t *testing.T) {
	for _, how := range []struct {
		name string
		cfg  admin.Config
	}{
		{"the limiter's own check", admin.Config{Limiter: fixedOnly{}}},
		{"Config.ValidateLimit", admin.Config{ValidateLimit: fixedOnly{}.ValidateLimit}},
	} {
		t.Run(how.name, func(t *testing.T) {
			f := newFixture(t, how.cfg)
			bucket := `{"rate":10,"period":"1s","algorithm":"token_bucket","burst":10}`
			code, body, _ := f.do(t, "PUT", "/v1/plans/pro", "Bearer "+token, `{"limits":{"api.tenant":`+bucket+`}}`)
			if code != http.StatusBadRequest || !strings.Contains(body, "api.tenant") || !strings.Contains(body, "token_bucket") {
				t.Errorf("PUT a token_bucket plan: %d %s, want 400 naming api.tenant and token_bucket", code, body)
			}
			code, body, _ = f.do(t, "PUT", "/v1/tenants/acme/overrides/api.tenant", "Bearer "+token, `{"limit":`+bucket+`}`)
			if code != http.StatusBadRequest || !strings.Contains(body, "token_bucket") {
				t.Errorf("PUT a token_bucket override: %d %s, want 400", code, body)
			}
			if len(f.plans.plans) != 0 || len(f.plans.overrides) != 0 {
				t.Errorf("refused limits were written: plans %v overrides %v", f.plans.plans, f.plans.overrides)
			}
			if code, body, _ := f.do(t, "PUT", "/v1/plans/pro", "Bearer "+token, `{"limits":{"api.tenant":`+limitJSON+`}}`); code != http.StatusNoContent {
				t.Errorf("PUT a fixed_window plan: %d %s, want 204", code, body)
			}
		})
	}
}
