package httplimit

import "github.com/sluicehq/sluice/internal/keyhash"

// logHash is how a log line shows key (a policy's final key): policy, ":"
// and its keyed hash (internal/keyhash: "~" and 128 bits of HMAC-SHA-256
// under the secret). A plain hash would be no secret for keys from a small
// space, such as the 2^32 IPv4 addresses; "~" keeps it apart from a store
// key's "#" hash (sluice.HashKey), which it is not.
func logHash(h *keyhash.Hasher, policy, key string) string {
	b := make([]byte, 0, len(policy)+1+keyhash.Len)
	b = append(append(b, policy...), ':')
	return string(h.Append(b, key))
}
