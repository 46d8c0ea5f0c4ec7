package admin_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/memstore"
)

// benchAdmin measures one call of method path with body and auth on the
// API in process, its audit line written (to io.Discard).
func benchAdmin(b *testing.B, method, path, auth, body string, want int) {
	mem := memstore.New(memstore.Config{SweepInterval: -1})
	defer mem.Close()
	api := admin.New(admin.Config{Token: []byte(token), Limiter: mem, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		if w.Code != want {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

// BenchmarkAdminPeek is an authenticated peek: the admin API's usual call.
func BenchmarkAdminPeek(b *testing.B) {
	benchAdmin(b, "POST", "/v1/keys/peek", "Bearer "+token, `{"key":"k","limit":`+limitJSON+`}`, http.StatusOK)
}

// BenchmarkAdminUnauthenticated is a call without credentials, as a flood
// sends them.
func BenchmarkAdminUnauthenticated(b *testing.B) {
	benchAdmin(b, "GET", "/v1/usage?key=k", "", "", http.StatusUnauthorized)
}
