package sluice

import (
	"fmt"
	"strconv"
	"strings"
)

// KeyFormat says whose layout a rate limit service's keys follow: Sluice's
// own, or envoyproxy/ratelimit's, so that both can share one Redis during
// a rolling swap. It is one setting seen from two sides: how the service
// spells a descriptor's key (service.Config.KeyFormat) and where the Redis
// store keeps its counters (redisstore.Config.KeyFormat); each package's
// KeyFormat is this type. The zero value is KeySluice.
type KeyFormat int

const (
	// KeySluice is Sluice's own layout: the service escapes values so that
	// no value can spell another descriptor's key, and the Redis store
	// keeps every state in "<prefix>:<algorithm>:{<key>}".
	KeySluice KeyFormat = iota
	// KeyEnvoy is envoyproxy/ratelimit's: the service spells its cache key
	// up to the window start, values as sent, and the Redis store keeps
	// fixed windows of whole seconds in its counters (see
	// redisstore.KeyEnvoy).
	KeyEnvoy
)

// String returns "sluice" or "envoy".
func (f KeyFormat) String() string {
	switch f {
	case KeySluice:
		return "sluice"
	case KeyEnvoy:
		return "envoy"
	}
	return "KeyFormat(" + strconv.Itoa(int(f)) + ")"
}

// ParseKeyFormat reads "sluice" or "envoy" (any case; "" is sluice).
func ParseKeyFormat(s string) (KeyFormat, error) {
	switch {
	case s == "" || strings.EqualFold(s, "sluice"):
		return KeySluice, nil
	case strings.EqualFold(s, "envoy"):
		return KeyEnvoy, nil
	}
	return 0, fmt.Errorf("key format %q: want sluice or envoy", s)
}
