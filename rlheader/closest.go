package rlheader

import "time"

// Standing is where a client stands under one policy, as the RateLimit
// field would report it. The zero value is a policy that admits now with
// nothing left and nothing to wait for.
type Standing struct {
	// Over is true when the policy refuses the request now.
	Over bool
	// Remaining is the quota left (RateLimit's r), in the policy's
	// quota unit; 0 when Over.
	Remaining int64
	// Wait is RateLimit's t: until the quota is back (ResetAfter), or,
	// when Over, until the client may try again (RetryAfter).
	Wait time.Duration
}

// Closer reports whether a is closer to exhaustion than b. It is the one
// rule by which every face picks the policy that the RateLimit field (and
// the legacy X-RateLimit-* trio) reports when several policies apply to a
// request: the face keeps the first policy and replaces it by each later
// one that is Closer, so ties go to the first.
//
//   - A policy that refuses is closer than one that admits.
//   - Of two that refuse, the one with the longer Wait is closer: its
//     Retry-After is the one the client must honour, and the RateLimit
//     field's t then does not point earlier than Retry-After (draft-11 §6).
//   - Of two that admit, the one with fewer units Remaining is closer,
//     whatever the quotas: the client can send at most that many more
//     requests before some policy refuses, so reporting it never lets a
//     client that trusts r exceed another policy. A policy with a larger
//     quota but a smaller fraction left would announce a larger r than the
//     client may spend. This is the rule of draft-06 and earlier ("the
//     window with the lower remaining"); draft-11 leaves the choice to the
//     server, and its example (Appendix B.1.2) reports the policy closest
//     to exhaustion in this sense.
//
// Remaining is compared as a count, so the policies compared must share a
// quota unit; the faces compare only their rate policies, all in requests.
func Closer(a, b Standing) bool {
	switch {
	case a.Over != b.Over:
		return a.Over
	case a.Over:
		return a.Wait > b.Wait
	default:
		return a.Remaining < b.Remaining
	}
}
