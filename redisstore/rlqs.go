package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// RLQSStore keeps the rate limit quota service's usage records in Redis,
// so that Sluice replicas divide each limit among all the Envoys they
// serve (it implements rlqs.Store). Each bucket is a hash,
// <prefix>:rlqs:<bucket>, of client → "demand expiry-in-ms"; a record
// counts until its expiry on the caller's clock, and the hash itself
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

// rlqsReport records a client's demand and returns the live records,
// dropping the expired ones: KEYS[1] the hash; ARGV client, demand, now
// (ms), expiry (ms), the hash's time to live (ms).
var rlqsReport = rueidis.NewLuaScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local all = redis.call('HGETALL', KEYS[1])
local now = tonumber(ARGV[3])
local out = {}
for i = 1, #all, 2 do
  local d, e = string.match(all[i + 1], '^(%S+) (%S+)$')
  if e == nil or tonumber(e) <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = d
  end
end
return out
`)

// Key returns the hash of bucket.
func (r *RLQSStore) Key(bucket string) string { return r.prefix + ":rlqs:" + bucket }

// Report implements rlqs.Store: one script call.
func (r *RLQSStore) Report(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration) (map[string]float64, error) {
	args := []string{client, strconv.FormatFloat(demand, 'g', -1, 64), strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(now.Add(ttl).UnixMilli(), 10), strconv.FormatInt((ttl + rlqsKeyMargin).Milliseconds(), 10)}
	flat, err := rlqsReport.Exec(ctx, r.client, []string{r.Key(bucket)}, args).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: rlqs report: %w", err)
	}
	out := make(map[string]float64, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		d, err := strconv.ParseFloat(strings.TrimSpace(flat[i+1]), 64)
		if err != nil {
			continue // not written by Report
		}
		out[flat[i]] = d
	}
	return out, nil
}

// Forget implements rlqs.Store.
func (r *RLQSStore) Forget(ctx context.Context, bucket, client string) error {
	if err := r.client.Do(ctx, r.client.B().Hdel().Key(r.Key(bucket)).Field(client).Build()).Error(); err != nil {
		return fmt.Errorf("redisstore: rlqs forget: %w", err)
	}
	return nil
}
