package service_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// registererOnly hides a registry's Gatherer.
type registererOnly struct{ prometheus.Registerer }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestJSONBadInput(t *testing.T) {
	h := start(t, t0, service.Config{Rules: mongo(5, config.Second)})
	cases := []struct {
		name   string
		body   []byte
		status int
		msg    string
	}{
		{"not JSON", []byte("{domain"), http.StatusBadRequest, "not a JSON RateLimitRequest"},
		{"unknown field", []byte(`{"domain":"d","bogus":1}`), http.StatusBadRequest, "not a JSON RateLimitRequest"},
		{"wrong type", []byte(`{"domain":5}`), http.StatusBadRequest, "not a JSON RateLimitRequest"},
		{"empty body", nil, http.StatusBadRequest, "not a JSON RateLimitRequest"},
		{"empty domain", []byte(`{"descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`), http.StatusBadRequest, "empty domain"},
		{"no descriptors", []byte(`{"domain":"mongo_cps"}`), http.StatusBadRequest, "no descriptors"},
		{"oversized", append([]byte(`{"domain":"`+strings.Repeat("x", service.MaxJSONBody)), `"}`...), http.StatusRequestEntityTooLarge, "exceeds 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := h.post("/json", c.body)
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.msg) {
				t.Errorf("POST /json: %d %q, want %d with %q", resp.StatusCode, body, c.status, c.msg)
			}
		})
	}
	t.Run("wrong method", func(t *testing.T) {
		resp, err := http.Get(h.http.URL + "/json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET /json: %d, want 405", resp.StatusCode)
		}
	})
}

func TestJSONAcceptsProtoNames(t *testing.T) {
	h := start(t, t0, service.Config{Rules: mongo(1, config.Second)})
	body := `{"domain":"mongo_cps","hits_addend":1,"descriptors":[{"entries":[{"key":"database","value":"users"}]}]}`
	resp, out := h.post("/json", []byte(body))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"overallCode":"OK"`) {
		t.Errorf("first: %d %s", resp.StatusCode, out)
	}
	resp, out = h.post("/json", []byte(body))
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(out), `"overallCode":"OVER_LIMIT"`) {
		t.Errorf("second: %d %s", resp.StatusCode, out)
	}
}

func TestNoMetricsWithoutGatherer(t *testing.T) {
	svc, err := service.New(service.Config{Limiter: failing{}, Registerer: registererOnly{prometheus.NewRegistry()}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /metrics without a gatherer: %d, want 404", rec.Code)
	}
}

// FuzzJSON posts arbitrary bodies to /json: never a panic, only 200, 400,
// 413 or 429.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"domain":"mongo_cps","descriptors":[{"entries":[{"key":"database","value":"users"}]}]}`,
		`{"domain":"mongo_cps","hitsAddend":4294967295,"descriptors":[{"entries":[{"key":"database","value":"users"}],"hitsAddend":"18446744073709551615"}]}`,
		`{"domain":"d","descriptors":[{"entries":[{"key":"k"}],"limit":{"requestsPerUnit":3,"unit":"YEAR"},"isNegativeHits":true}]}`,
		`{"domain":"d","descriptors":[{"entries":[]}]}`,
		`{"domain":"","descriptors":[]}`,
		`{}`, ``, `null`, `[`, `{"domain":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	rules := mongo(5, config.Second).add(fixed("mongo_cps.k", 2, config.Minute), "k", "")
	rules.rules[1].rl.Limit.Algorithm = sluice.TokenBucket
	h := start(f, t0, service.Config{Rules: rules, Headers: service.HeadersDraft11})
	handler := h.svc.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("POST", "/json", bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		default:
			t.Errorf("POST /json %q: status %d: %s", body, rec.Code, rec.Body)
		}
	})
}
