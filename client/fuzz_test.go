package client

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rlheader"
)

// FuzzServerWait checks the client's header handling end to end: parsing
// Retry-After and RateLimit (one field line per '\n'), the precedence
// between them, and the wait a Transport chooses from them, under any
// MaxServerWait. The parsers themselves are fuzzed in package rlheader.
func FuzzServerWait(f *testing.F) {
	f.Add("120", `"default";r=0;t=30`, int64(60))
	f.Add("", `"a";r=0;t=4, "b";r=0;t=7`, int64(0))
	f.Add("-5", `"a";r=-1;t=5`, int64(-1))
	f.Fuzz(func(t *testing.T, retryAfter, rateLimit string, maxWaitSec int64) {
		now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
		h := http.Header{}
		if retryAfter != "" {
			for v := range strings.SplitSeq(retryAfter, "\n") {
				h.Add(rlheader.HeaderRetryAfter, v)
			}
		}
		if rateLimit != "" {
			for v := range strings.SplitSeq(rateLimit, "\n") {
				h.Add(rlheader.HeaderRateLimit, v)
			}
		}

		d, ok := ServerWait(h, now)
		if d < 0 || d > rlheader.MaxRetryAfter || !ok && d != 0 {
			t.Fatalf("ServerWait = %v, %v", d, ok)
		}
		raValid := false
		if vs := h.Values(rlheader.HeaderRetryAfter); len(vs) == 1 {
			if ra, rok := rlheader.ParseRetryAfter(vs[0], now); rok {
				raValid = true
				if !ok || d != ra {
					t.Fatalf("ServerWait = %v, %v; Retry-After %q says %v and takes precedence", d, ok, vs[0], ra)
				}
			}
		}
		ss, err := rlheader.ParseStatuses(h.Values(rlheader.HeaderRateLimit))
		if !raValid {
			if err != nil && ok {
				t.Fatalf("ServerWait = %v, true from a malformed RateLimit (%v)", d, err)
			}
			exhausted := false
			for _, s := range ss {
				if s.Remaining == 0 && s.Reset >= 0 {
					exhausted = true
					if err == nil && s.Reset > d {
						t.Fatalf("ServerWait = %v, below an exhausted item's t %v", d, s.Reset)
					}
				}
			}
			if err == nil && ok != exhausted {
				t.Fatalf("ServerWait = %v, %v; exhausted items: %v", d, ok, exhausted)
			}
		}

		if rep, rok := rateLimitReport(h); rok {
			if err != nil || rep.remaining < 0 || rep.remaining > rlheader.MaxInteger || rep.reset < 0 {
				t.Fatalf("rateLimitReport = %+v from %q (parse error %v)", rep, rateLimit, err)
			}
		}

		limit := time.Duration(maxWaitSec%1_000_000) * time.Second
		for _, r := range []float64{0, 0.5, 0.999} {
			tr := &Transport{MaxServerWait: limit, Backoff: Backoff{Rand: func() float64 { return r }}}
			eff := tr.maxServerWait()
			prev := time.Duration(0)
			for attempt := 1; attempt <= 3; attempt++ {
				w, fromServer, wok := tr.nextWait(h, now, attempt, prev)
				if fromServer != (ok && d > 0) {
					t.Fatalf("nextWait: fromServer %v, server wait %v, %v", fromServer, d, ok)
				}
				if !wok {
					if !fromServer || eff < 0 || d <= eff {
						t.Fatalf("nextWait gave up with server wait %v, cap %v", d, eff)
					}
					continue
				}
				if w < 0 {
					t.Fatalf("nextWait = %v", w)
				}
				if fromServer {
					if w < d || eff >= 0 && w > eff || w-d > d/10+1 {
						t.Fatalf("nextWait = %v for server wait %v, cap %v", w, d, eff)
					}
				} else if w > DefaultCap {
					t.Fatalf("nextWait = %v, above the backoff's cap", w)
				}
				prev = w
			}
		}
	})
}
