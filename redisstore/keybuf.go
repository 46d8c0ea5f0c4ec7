package redisstore

import (
	"context"
	"sync"
	"unsafe"

	"github.com/redis/rueidis"
)

// The Redis key of a decision is built in pooled memory rather than as a
// new string: it is needed only until Redis has answered the script, and
// was one of a decision's two allocations (the other is rueidis's reply).

// maxPooledKey is the longest key whose memory is pooled; a longer one
// (hostile or not) is built in memory the garbage collector takes back.
const maxPooledKey = 1 << 10

var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

// execOnKey runs script on one key, the concatenation of parts, with args.
// The key's memory goes back to the pool only once Redis has replied (a
// value or a Redis error): then rueidis has written the command and holds
// no reference to it. After any other outcome (the context done, the
// connection lost) the command may still sit in rueidis's queue, so the
// memory is left to the garbage collector, which keeps it while referenced.
func execOnKey(ctx context.Context, c rueidis.Client, script *rueidis.Lua, args []string, parts ...string) rueidis.RedisResult {
	return execOnKeys(ctx, c, script, args, "", parts...)
}

// execOnKeys is execOnKey with, when second is not "", a second key
// (KEYS[2]): parts, the parts of s.keyParts, with the kind (parts[2])
// second, the key of another layout of the same caller key, which the
// script seeds a missing key from (see predecessor). The second key is
// sent only if it hashes to the same slot as the first (see seedKind):
// else, and on a retry after TRYAGAIN, the script gets KEYS[1] alone and
// seeds nothing.
func execOnKeys(ctx context.Context, c rueidis.Client, script *rueidis.Lua, args []string, second string, parts ...string) rueidis.RedisResult {
	second = seedKind(second, parts)
	bp := keyBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	for _, p := range parts {
		buf = append(buf, p...)
	}
	n := len(buf)
	var keys [2]string
	if second != "" {
		buf = appendKeyOf(buf, second, parts)
	}
	keys[0] = unsafe.String(unsafe.SliceData(buf), n)
	nk := 1
	if second != "" {
		keys[1], nk = unsafe.String(unsafe.SliceData(buf[n:]), len(buf)-n), 2
	}
	resp := script.Exec(ctx, c, keys[:nk], args)
	if nk == 2 && tryAgain(resp) {
		// A Cluster is migrating the keys' slot and its old node holds one
		// of them and not the other: Redis refuses any call on both until
		// the migration ends. The key alone goes where it is (rueidis
		// follows the ASK), unseeded, as the other scripts' keys do.
		resp = script.Exec(ctx, c, keys[:1], args)
	}
	if cap(buf) <= maxPooledKey && replied(resp) {
		*bp = buf[:0]
		keyBufs.Put(bp)
	}
	return resp
}

// tryAgain reports whether resp is Redis's TRYAGAIN: a call on several
// keys of a slot being migrated, some of them not on the node asked.
// Nothing ran.
func tryAgain(resp rueidis.RedisResult) bool {
	rerr, ok := rueidis.IsRedisErr(resp.Error())
	return ok && rerr.IsTryAgain()
}

// seedKind returns kind if the key of parts (s.keyParts's) with its kind
// replaced by kind hashes to the same Redis Cluster slot as the key of
// parts, else "" (and "" for kind ""). Both keys hash alike when the
// key's hash tag is the caller key the store wraps in braces; a caller
// key that starts with '}' (an empty tag: the whole key is hashed), or a
// prefix with braces of its own, gives the two layouts' keys a slot each,
// and a script call on both would be refused (CROSSSLOT), or rejected by
// rueidis before it is sent. Such a key is not seeded across layouts: the
// script gets its own key alone. The rule is the same without a Cluster,
// so that a key is seeded or not whatever the deployment.
func seedKind(kind string, parts []string) string {
	var other [6]string // as many as s.keyParts returns
	if kind == "" || len(parts) != len(other) {
		return ""
	}
	copy(other[:], parts)
	other[2] = kind
	if keySlot(parts) != keySlot(other[:]) {
		return ""
	}
	return kind
}

// replied reports whether resp is an answer of Redis, a value or an error
// reply, rather than a failure to get one.
func replied(resp rueidis.RedisResult) bool {
	err := resp.Error()
	if err == nil {
		return true
	}
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// appendKeyOf appends to buf the key parts (s.keyParts's) name with its
// kind replaced by kind.
func appendKeyOf(buf []byte, kind string, parts []string) []byte {
	for i, p := range parts {
		if i == 2 {
			p = kind
		}
		buf = append(buf, p...)
	}
	return buf
}
