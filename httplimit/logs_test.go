package httplimit_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// A refusal's log line carries the key's hash, never a key taken from a
// header (an API key), unless LogKeys; RefusalLevel moves it out of the
// info level for a program that logs refusals elsewhere.
func TestRefusalLogHidesTheKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		logKeys bool
		level   slog.Level
		want    string // in the info-level log; "" for nothing
	}{
		{"hashed", false, 0, "key=p:~"},
		{"raw on request", true, 0, "key=p:sk_live_SECRET"},
		{"debug", false, slog.LevelDebug, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			m := mustNew(t, httplimit.Config{
				Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0)), Logger: slog.New(slog.NewTextHandler(&logs, nil)), LogKeys: tc.logKeys},
				Policies: []httplimit.Policy{{Name: "p", Key: httplimit.Header("X-Api-Key"),
					Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Minute}}},
				RefusalLevel: tc.level,
			})
			h := m.Handler(http.HandlerFunc(ok))
			for range 2 {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-Api-Key", "sk_live_SECRET")
				do(h, r)
			}
			got := logs.String()
			if tc.want == "" {
				if got != "" {
					t.Fatalf("logged at info: %s", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || strings.Count(got, "\n") != 1 {
				t.Fatalf("log %q, want one line with %q", got, tc.want)
			}
			if !tc.logKeys && strings.Contains(got, "SECRET") {
				t.Fatalf("the key reached the log: %s", got)
			}
		})
	}
}

// Ready runs after the rate limits and before the concurrency slots: it
// sees no slot taken, and a request it answers takes none.
func TestReadyBeforeSlots(t *testing.T) {
	slots := new(httplimit.Slots)
	during := -1
	reached := false
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0))},
		Policies: []httplimit.Policy{{Name: "p", Key: httplimit.Global(),
			Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: time.Minute}}},
		Concurrency: []httplimit.ConcurrencyPolicy{{Name: "c", Max: 1, Slots: slots}},
		Ready: func(w http.ResponseWriter, r *http.Request) bool {
			during = slots.InFlight("")
			w.WriteHeader(http.StatusRequestTimeout)
			return false
		},
	})
	rec := do(m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })), httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusRequestTimeout || reached || during != 0 || slots.InFlight("") != 0 {
		t.Fatalf("status %d, handler reached %v, slots during Ready %d, after %d", rec.Code, reached, during, slots.InFlight(""))
	}
}

// refusalLogKey returns the key a refusal's log line shows for a client
// at ip refused by policy "p" (1 per minute per IP) of a Middleware with
// the log key secret secret, and the whole line.
func refusalLogKey(t *testing.T, secret []byte, ip string) (key, line string) {
	t.Helper()
	var logs bytes.Buffer
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0)), Logger: slog.New(slog.NewTextHandler(&logs, nil)), LogKeySecret: secret},
		Policies: []httplimit.Policy{{Name: "p", Key: httplimit.ClientIP(nil),
			Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Minute}}},
	})
	h := m.Handler(http.HandlerFunc(ok))
	for range 2 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ip + ":1234"
		do(h, r)
	}
	line = logs.String()
	k := regexp.MustCompile(` key=(\S+)`).FindStringSubmatch(line)
	if k == nil {
		t.Fatalf("no key in the refusal's log line %q", line)
	}
	return k[1], line
}

// A log line's key hash cannot be reversed by trying every IPv4 address:
// it is a keyed hash (HMAC-SHA-256) under a secret, a random one per
// process by default. The same key hashes the same within a process (so
// one client's refusals can be followed), and the same under one secret set
// on several replicas, differently under another.
func TestRefusalLogKeyIsKeyedHash(t *testing.T) {
	const ip = "203.0.113.7"
	k1, line := refusalLogKey(t, nil, ip)
	for _, plain := range []string{"p:" + ip, ip} {
		sum := sha256.Sum256([]byte(plain))
		if h := hex.EncodeToString(sum[:16]); strings.Contains(line, h) {
			t.Errorf("the log line holds SHA-256(%q), which anyone can compute for every IPv4 address: %s", plain, line)
		}
	}
	if strings.Contains(line, ip) {
		t.Errorf("the log line holds the IP: %s", line)
	}
	if k2, _ := refusalLogKey(t, nil, ip); k2 != k1 {
		t.Errorf("the same key hashes %q and %q in one process", k1, k2)
	}
	if k3, _ := refusalLogKey(t, nil, "203.0.113.8"); k3 == k1 {
		t.Errorf("two IPs hash the same: %q", k1)
	}
	a, _ := refusalLogKey(t, []byte("replica secret"), ip)
	b, _ := refusalLogKey(t, []byte("replica secret"), ip)
	c, _ := refusalLogKey(t, []byte("another secret"), ip)
	if a != b || a == c || a == k1 {
		t.Errorf("secret A: %q and %q (want equal), secret B: %q, per-process: %q (want both different)", a, b, c, k1)
	}
}
