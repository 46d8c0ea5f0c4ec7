package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// RLQSStore keeps the rate limit quota service's usage records in Redis,
// so that Sluice replicas divide each limit among all the Envoys they
// serve (it implements rlqs.Store). Each bucket is a hash,
// <prefix>:rlqs:<bucket>, of client → "demand expiry-in-ms", and of a
// NUL byte and client → the stream that wrote the record (see
// rlqs.Store.Forget); a record counts until its expiry on the caller's
// clock, and the hash itself
// expires a minute after its last record's time to live. It is safe for
// concurrent use.
type RLQSStore struct {
	client rueidis.Client
	prefix string
}

// RLQS returns the store's RLQSStore, on the store's client and prefix.
func (s *Store) RLQS() *RLQSStore { return NewRLQSStore(s.client, s.prefix) }

// NewRLQSStore returns an RLQSStore on client, with keys under prefix
// (DefaultPrefix when empty). It does not close client.
func NewRLQSStore(client rueidis.Client, prefix string) *RLQSStore {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &RLQSStore{client: client, prefix: prefix}
}

// rlqsKeyMargin keeps a bucket's hash a while past its last record.
const rlqsKeyMargin = time.Minute

// rlqsReport records a client's demand: KEYS[1] the hash; ARGV client,
// "demand expiry-ms", the hash's time to live (ms), the writer (empty
// for none). The writer goes in a field of its own, the client's name
// after a NUL byte (which no client name holds), which the demands script
// skips.
var rlqsReport = rueidis.NewLuaScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[1], '\0' .. ARGV[1])
else
  redis.call('HSET', KEYS[1], '\0' .. ARGV[1], ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// rlqsDemands returns the live records of a hash, flat, and drops the
// expired ones with their writers: KEYS[1] the hash; ARGV[1] now (ms).
var rlqsDemands = rueidis.NewLuaScript(`
local all = redis.call('HGETALL', KEYS[1])
local now = tonumber(ARGV[1])
local out = {}
for i = 1, #all, 2 do
  if string.byte(all[i], 1) ~= 0 then
    local d, e = string.match(all[i + 1], '^(%S+) (%S+)$')
    if e == nil or tonumber(e) <= now then
      redis.call('HDEL', KEYS[1], all[i], '\0' .. all[i])
    else
      out[#out + 1] = all[i]
      out[#out + 1] = d
    end
  end
end
return out
`)

// rlqsForget removes a client's record unless another writer wrote it
// last: KEYS[1] the hash; ARGV client, writer (empty: whoever wrote it).
// A record without a writer field is removed.
var rlqsForget = rueidis.NewLuaScript(`
local w = redis.call('HGET', KEYS[1], '\0' .. ARGV[1])
if ARGV[2] ~= '' and w and w ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1], '\0' .. ARGV[1])
return 1
`)

// Key returns the hash of bucket.
func (r *RLQSStore) Key(bucket string) string { return r.prefix + ":rlqs:" + bucket }

// Report implements rlqs.Store: one script call, O(1).
func (r *RLQSStore) Report(ctx context.Context, bucket, client, writer string, demand float64, now time.Time, ttl time.Duration) error {
	rec := strconv.FormatFloat(demand, 'g', -1, 64) + " " + strconv.FormatInt(now.Add(ttl).UnixMilli(), 10)
	args := []string{client, rec, strconv.FormatInt((ttl + rlqsKeyMargin).Milliseconds(), 10), writer}
	if err := rlqsReport.Exec(ctx, r.client, []string{r.Key(bucket)}, args).Error(); err != nil {
		return fmt.Errorf("redisstore: rlqs report: %w", err)
	}
	return nil
}

// Demands implements rlqs.Store: one script call, linear in the
// bucket's clients.
func (r *RLQSStore) Demands(ctx context.Context, bucket string, now time.Time) (map[string]float64, error) {
	flat, err := rlqsDemands.Exec(ctx, r.client, []string{r.Key(bucket)}, []string{strconv.FormatInt(now.UnixMilli(), 10)}).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: rlqs demands: %w", err)
	}
	out := make(map[string]float64, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		d, err := strconv.ParseFloat(flat[i+1], 64) // the script sends it without spaces
		if err != nil {
			continue // not written by Report
		}
		out[flat[i]] = d
	}
	return out, nil
}

// Forget implements rlqs.Store: one script call, O(1).
func (r *RLQSStore) Forget(ctx context.Context, bucket, client, writer string) error {
	if err := rlqsForget.Exec(ctx, r.client, []string{r.Key(bucket)}, []string{client, writer}).Error(); err != nil {
		return fmt.Errorf("redisstore: rlqs forget: %w", err)
	}
	return nil
}
