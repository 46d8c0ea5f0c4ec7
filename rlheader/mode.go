package rlheader

import (
	"fmt"
	"strings"
)

// Mode says which rate limit headers a face sends: none (Off), the legacy
// trio (limit, remaining, reset, named by LegacyNames), the draft's
// (RateLimit-Policy and RateLimit), or Both. It is one of these values, not
// a set of bits. The zero value, Default, is the face's own default: Off
// for the rate limit service (package service), which sends one of Off,
// Legacy and Draft11; Draft11 for the HTTP middleware (package httplimit)
// and the proxy, which may send Both.
type Mode uint8

const (
	// Default is the face's own choice (see Mode).
	Default Mode = iota
	// Off sends no rate limit headers.
	Off
	// Legacy sends the legacy trio: the limit, what remains and the
	// seconds until the reset.
	Legacy
	// Draft11 sends RateLimit-Policy and RateLimit as
	// draft-ietf-httpapi-ratelimit-headers-11 defines them.
	Draft11
	// Both sends the legacy trio and the draft's headers.
	Both
)

var modeNames = [...]string{Default: "default", Off: "off", Legacy: "legacy", Draft11: "draft-11", Both: "both"}

// String returns the Mode's name: "default", "off", "legacy", "draft-11"
// or "both"; a value that is none of these prints as "rlheader.Mode(n)".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("rlheader.Mode(%d)", uint8(m))
}

// Or returns m, or def when m is Default: the Mode a face with the default
// def sends.
func (m Mode) Or(def Mode) Mode {
	if m == Default {
		return def
	}
	return m
}

// SendsLegacy reports whether m sends the legacy trio (Legacy or Both).
func (m Mode) SendsLegacy() bool { return m == Legacy || m == Both }

// SendsDraft11 reports whether m sends the draft's headers (Draft11 or
// Both).
func (m Mode) SendsDraft11() bool { return m == Draft11 || m == Both }

// ParseMode returns the Mode named s, leniently, as a flag or an
// environment variable is read: ParseModeStrict's names in any case, the
// old "draft11" for "draft-11", and "" for Default. It is ParseModeStrict
// after those are mapped: the one parser of a header mode's name. A face
// that cannot send a Mode refuses it itself.
func ParseMode(s string) (Mode, error) {
	switch l := strings.ToLower(s); l {
	case "":
		return Default, nil
	case "draft11":
		return Draft11, nil
	default:
		if m, err := ParseModeStrict(l); err == nil {
			return m, nil
		}
	}
	return Default, fmt.Errorf("unknown header mode %q (want off, legacy, draft-11 or both)", s)
}

// ParseModeStrict returns the Mode spelled exactly as documented: "off",
// "legacy", "draft-11" or "both", as a config file is read; any other
// spelling, "" included, is an error naming the four.
func ParseModeStrict(s string) (Mode, error) {
	switch s {
	case "off":
		return Off, nil
	case "legacy":
		return Legacy, nil
	case "draft-11":
		return Draft11, nil
	case "both":
		return Both, nil
	}
	return Default, fmt.Errorf("unknown header mode %q (want off, legacy, draft-11 or both)", s)
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
