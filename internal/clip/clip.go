// Package clip cuts a client's string to a bound in bytes for a log line or
// an error message, never inside a UTF-8 sequence: the one rule behind the
// service's debug log, the xDS client's error details, the admin audit log,
// the live page, pgstore's and rlqs's messages.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package.
package clip

import "unicode/utf8"

// Cut returns the longest prefix of s of at most max bytes that does not
// end inside a UTF-8 sequence, and whether anything was cut. A max of 0 or
// less gives "" (and true when s is not empty). The marker that says a
// string was cut is the caller's.
func Cut(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	if max < 0 {
		max = 0
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max], true
}

// Ellipsis returns s cut by Cut to max bytes with "…" after the cut, or s
// itself when it fits.
func Ellipsis(s string, max int) string {
	if head, cut := Cut(s, max); cut {
		return head + "…"
	}
	return s
}
