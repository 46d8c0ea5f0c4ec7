package httplimit

import "github.com/sluicehq/sluice"

// PolicyKey is the key a Middleware gives its Limiter for policy and a
// request's key: key scoped to its policy ("policy:key"), so that two
// policies never share an allowance, and hashed (sluice.HashKey, as
// "policy:#hash") when hashKeys (Config.HashKeys) or when it is longer
// than sluice.MaxKeyLen. "#" marks a hash, so that no raw key of 32 hex
// digits can share its allowance. Read a key's state with it
// (sluice.Peeker) as the Middleware would decide it.
func PolicyKey(policy, key string, hashKeys bool) string {
	k := policy + ":" + key
	if hashKeys || len(k) > sluice.MaxKeyLen {
		return sluice.HashKey(policy+":", k)
	}
	return k
}

// observed is the Outcome of a rate policy's decision.
func observed(allowed, shadow bool) Outcome {
	switch {
	case allowed:
		return Allowed
	case shadow:
		return Shadow
	}
	return Limited
}
