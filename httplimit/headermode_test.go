package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rlheader"
)

// TestConfigHeadersChooseTheHeadersSent checks that Config.Headers, one
// rlheader.Mode, chooses the headers a response carries: the draft's by
// default, the legacy trio, both or none; and that New refuses a value
// that is no header mode.
func TestConfigHeadersChooseTheHeadersSent(t *testing.T) {
	for _, tt := range []struct {
		mode          rlheader.Mode
		draft, legacy bool
	}{
		{rlheader.Default, true, false},
		{rlheader.Draft11, true, false},
		{rlheader.Legacy, false, true},
		{rlheader.Both, true, true},
		{rlheader.Off, false, false},
	} {
		store := memstore.New(memstore.Config{SweepInterval: -1})
		m, err := httplimit.New(httplimit.Config{
			Settings: httplimit.Settings{Limiter: store, Headers: tt.mode},
			Policies: []httplimit.Policy{{Name: "p", Limit: sluice.PerMinute(5), Key: httplimit.Global()}},
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		store.Close()
		draft, legacy := rec.Header().Get("RateLimit-Policy") != "", rec.Header().Get("X-RateLimit-Limit") != ""
		if draft != tt.draft || legacy != tt.legacy {
			t.Errorf("Headers %v: draft headers %t, legacy %t; want %t, %t", tt.mode, draft, legacy, tt.draft, tt.legacy)
		}
	}
	store := memstore.New(memstore.Config{SweepInterval: -1})
	defer store.Close()
	_, err := httplimit.New(httplimit.Config{
		Settings: httplimit.Settings{Limiter: store, Headers: rlheader.Both + 1},
		Policies: []httplimit.Policy{{Name: "p", Limit: sluice.PerMinute(5), Key: httplimit.Global()}},
	})
	if err == nil {
		t.Error("New took a header mode past Both")
	}
}
