package client

import (
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
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
		addLines(h, rlheader.HeaderRetryAfter, retryAfter)
		addLines(h, rlheader.HeaderRateLimit, rateLimit)

		d, ok := ServerWait(h, now)
		if d < 0 || d > rlheader.MaxRetryAfter || !ok && d != 0 {
			t.Fatalf("ServerWait = %v, %v", d, ok)
		}
		checkServerWaitSources(t, h, now, d, ok)
		if rep, rok := rateLimitReport(h); rok {
			_, err := rlheader.ParseStatuses(h.Values(rlheader.HeaderRateLimit))
			if err != nil || rep.remaining < 0 || rep.remaining > rlheader.MaxInteger || rep.reset < 0 {
				t.Fatalf("rateLimitReport = %+v from %q (parse error %v)", rep, rateLimit, err)
			}
		}
		limit := time.Duration(maxWaitSec%1_000_000) * time.Second
		for _, r := range []float64{0, 0.5, 0.999} {
			checkNextWaits(t, h, now, d, ok, limit, r)
		}
	})
}

// addLines adds one field line of name per '\n'-separated line of v; none
// for an empty v.
func addLines(h http.Header, name, v string) {
	if v == "" {
		return
	}
	for line := range strings.SplitSeq(v, "\n") {
		h.Add(name, line)
	}
}

// checkServerWaitSources checks ServerWait's answer d, ok for h against
// the headers it came from: a valid single Retry-After wins; otherwise a
// malformed RateLimit gives nothing, and a well-formed one gives a wait
// exactly when an item is exhausted, no shorter than any exhausted item's t.
func checkServerWaitSources(t *testing.T, h http.Header, now time.Time, d time.Duration, ok bool) {
	t.Helper()
	if vs := h.Values(rlheader.HeaderRetryAfter); len(vs) == 1 {
		if ra, rok := rlheader.ParseRetryAfter(vs[0], now); rok {
			if !ok || d != ra {
				t.Fatalf("ServerWait = %v, %v; Retry-After %q says %v and takes precedence", d, ok, vs[0], ra)
			}
			return
		}
	}
	ss, err := rlheader.ParseStatuses(h.Values(rlheader.HeaderRateLimit))
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

// checkNextWaits checks three attempts' waits of a Transport with
// MaxServerWait limit and jitter r, against the server's wait d, ok: the
// server's wait (up to a tenth more, within the cap) when it gave one, or
// giving up when that is over the cap; the backoff, within its cap,
// otherwise.
func checkNextWaits(t *testing.T, h http.Header, now time.Time, d time.Duration, ok bool, limit time.Duration, r float64) {
	t.Helper()
	tr := &Transport{MaxServerWait: limit, Backoff: Backoff{Rand: func() float64 { return r }}}
	eff := serverWaitBound(limit)
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

// FuzzPolicyLimit checks what a Pacer learns from RateLimit-Policy (one
// field line per '\n') against any configured limit and fraction: nothing
// from a malformed field; otherwise a valid limit, strictly slower than the
// configured one, within its capacity, that admits no more than q requests
// in any span of w of each policy it obeys (for a fraction below 1).
func FuzzPolicyLimit(f *testing.F) {
	f.Add(`"default";q=10;w=1`, 100, int64(1000), 0.9)
	f.Add(`"burst";q=100;w=60, "daily";q=1000;w=86400`, 5, int64(1000), 0.5)
	f.Add(`"a";q=0;w=3`+"\n"+`"b";q=7;w=2;qu="requests";pk=:AQID:`, 1, int64(10), 0.0)
	f.Add(`"c";q=10;w=0`, 100, int64(1000), 1.0)
	f.Fuzz(func(t *testing.T, field string, rate int, periodMS int64, frac float64) {
		lim := sluice.PerSecond(1).WithBurst(max(rate%1000, 1))
		lim.Rate, lim.Period = rate, time.Duration(periodMS)*time.Millisecond
		if lim.Validate() != nil {
			return
		}
		h := http.Header{}
		lines := strings.Split(field, "\n")
		for _, v := range lines {
			h.Add(rlheader.HeaderRateLimitPolicy, v)
		}
		frac = fraction(frac)
		l, ok := learnPolicies(h, lim, frac)
		ps, err := rlheader.ParsePolicies(h.Values(rlheader.HeaderRateLimitPolicy))
		if ok != (err == nil && len(ps) > 0) {
			t.Fatalf("learnPolicies ok = %v; ParsePolicies: %d policies, %v", ok, len(ps), err)
		}
		if !ok || l.limit.Rate == 0 {
			return
		}
		got := l.limit
		if err := got.Validate(); err != nil {
			t.Fatalf("learned %+v: %v", got, err)
		}
		if !slower(int64(got.Rate), got.Period, int64(lim.Rate), lim.Period) || got.Burst > lim.Capacity() {
			t.Fatalf("learned %+v, not below the configured %+v", got, lim)
		}
		if frac >= 1 {
			return
		}
		obeyed := 0
		for _, p := range ps {
			if p.Unit != "" && p.Unit != rlheader.UnitRequests || p.Window <= 0 ||
				!slower(p.Quota, p.Window, int64(lim.Rate), lim.Period) {
				continue
			}
			pl, pok := scaledPolicy(p.Quota, p.Window, frac)
			if !pok || !slower(int64(pl.Rate), pl.Period, int64(lim.Rate), lim.Period) {
				continue
			}
			obeyed++
			// Burst + ⌊Rate·w/Period⌋ ≤ max(q, 1).
			n := new(big.Int).Mul(big.NewInt(int64(got.Rate)), big.NewInt(int64(p.Window)))
			n.Quo(n, big.NewInt(int64(got.Period)))
			n.Add(n, big.NewInt(int64(got.Burst)))
			if n.Cmp(big.NewInt(max(p.Quota, 1))) > 0 {
				t.Fatalf("learned %+v admits %v in a span of %v; policy %+v allows %d", got, n, p.Window, p, max(p.Quota, 1))
			}
		}
		if obeyed == 0 {
			t.Fatalf("learned %+v from no usable policy in %+v", got, ps)
		}
	})
}
