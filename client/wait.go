package client

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/rlheader"
)

// ServerWait returns the wait a response's header asks for, received at now,
// and whether it asks for one:
//
//   - Retry-After (RFC 9110 §10.2.3), in delay-seconds or any of the three
//     HTTP-date formats, takes precedence. A field that is malformed
//     (negative, fractional, not a date) or present more than once is
//     ignored.
//   - Otherwise the RateLimit field (draft-ietf-httpapi-ratelimit-headers-11):
//     the longest t of the items whose r is 0, that is the time until every
//     exhausted policy has quota again. A malformed field is ignored as a
//     whole, as the draft requires; items without t are skipped.
//
// A wait of zero (Retry-After: 0, a date in the past, t=0) is reported as
// 0, true. The wait is what the server said, up to rlheader.MaxRetryAfter;
// bounding it is the caller's job (see Transport.MaxServerWait).
//
// ServerWait says nothing about whether to retry: a 2xx with r=0 also asks
// the client to wait before its next request.
func ServerWait(h http.Header, now time.Time) (time.Duration, bool) {
	if d, ok := retryAfter(h, now); ok {
		return d, true
	}
	// The most restrictive item has r=0 if any item does, and then the
	// longest t of those.
	if rep, ok := rateLimitReport(h); ok && rep.remaining == 0 {
		return rep.reset, true
	}
	return 0, false
}

// retryAfter returns the wait h's Retry-After field asks for, received at
// now, unless the field is absent, malformed or present more than once.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if vs := h.Values(rlheader.HeaderRetryAfter); len(vs) == 1 {
		return rlheader.ParseRetryAfter(vs[0], now)
	}
	return 0, false
}

// report is what a response's RateLimit field says of the most restrictive
// policy: remaining more requests are admitted until reset from now.
type report struct {
	remaining int64
	reset     time.Duration
}

// rateLimitReport returns the most restrictive item of h's RateLimit field:
// the least remaining, and of those the longest reset. Items without t, and
// malformed fields, say nothing.
func rateLimitReport(h http.Header) (report, bool) {
	vs := h.Values(rlheader.HeaderRateLimit)
	if len(vs) == 0 {
		return report{}, false
	}
	ss, err := rlheader.ParseStatuses(vs)
	if err != nil {
		return report{}, false
	}
	var best report
	found := false
	for _, s := range ss {
		if s.Reset < 0 {
			continue
		}
		if !found || s.Remaining < best.remaining || s.Remaining == best.remaining && s.Reset > best.reset {
			best = report{remaining: s.Remaining, reset: s.Reset}
			found = true
		}
	}
	return best, found
}

// serverJitter is the largest fraction of a server-given wait added to it, so
// that clients told the same Retry-After do not return in the same instant.
const serverJitter = 0.1

// jitterServerWait returns d plus up to serverJitter·d (r in [0, 1) picks
// how much), never above limit. limit < 0 means no limit.
func jitterServerWait(d time.Duration, r float64, limit time.Duration) time.Duration {
	extra := scale(r, time.Duration(float64(d)*serverJitter))
	if limit < 0 {
		limit = 1<<63 - 1
	}
	if extra > limit-d {
		return limit
	}
	return d + extra
}

// sleep waits for d or until ctx is done, whichever comes first, and returns
// the context's cause in the second case.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
