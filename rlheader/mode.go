package rlheader

import (
	"fmt"
	"strings"
)

// Mode says which rate limit headers a face sends: the draft's
// (RateLimit-Policy and RateLimit), the legacy trio (limit, remaining,
// reset, named by LegacyNames), both, or none. It is a set: Legacy|Draft11
// is both. The rate limit service (service.HeaderMode) sends at most one
// of them; the HTTP middleware (package httplimit) may send both. The zero
// value is Off.
type Mode uint8

const (
	// Off sends no rate limit headers.
	Off Mode = 0
	// Legacy sends the legacy trio: the limit, what remains and the
	// seconds until the reset.
	Legacy Mode = 1 << 0
	// Draft11 sends RateLimit-Policy and RateLimit as
	// draft-ietf-httpapi-ratelimit-headers-11 defines them.
	Draft11 Mode = 1 << 1
)

// String returns "off", "legacy", "draft-11" or "legacy+draft-11".
func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Legacy:
		return "legacy"
	case Draft11:
		return "draft-11"
	case Legacy | Draft11:
		return "legacy+draft-11"
	}
	return fmt.Sprintf("HeaderMode(%d)", uint8(m))
}

// ParseMode returns the Mode named s, in any case: "off" (or ""),
// "legacy", "draft-11" (or "draft11"); the one parser of a header mode's
// name.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "off", "":
		return Off, nil
	case "legacy":
		return Legacy, nil
	case "draft-11", "draft11":
		return Draft11, nil
	}
	return 0, fmt.Errorf("unknown header mode %q (want off, legacy or draft-11)", s)
}

// LegacyNames are the field names of the legacy trio of headers.
type LegacyNames struct {
	Limit, Remaining, Reset string
}

// The two spellings of the legacy trio in use. EnvoyLegacyNames are
// envoyproxy/ratelimit's defaults for its LIMIT_RESPONSE_HEADERS_ENABLED
// headers (its LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and
// LIMIT_RESET_HEADER settings), which the rate limit service sends;
// XLegacyNames are the X-RateLimit-* names HTTP APIs have long sent, which
// the HTTP middleware and the proxy send.
var (
	EnvoyLegacyNames = LegacyNames{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}
	XLegacyNames     = LegacyNames{Limit: "X-RateLimit-Limit", Remaining: "X-RateLimit-Remaining", Reset: "X-RateLimit-Reset"}
)
