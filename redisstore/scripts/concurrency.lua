-- concurrency.lua: an in-flight limit shared across servers. Each holder
-- holds a lease, a sorted-set member scored by the instant it expires, so
-- that a holder that crashed gives its slot back by itself.
--
-- KEYS[1]  a sorted set: member = lease id, score = expiry in microseconds
-- ARGV[1]  mode: "acquire", "release" or "renew"   (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""               (see prelude.lua)
-- ARGV[3]  the most leases that may be held at once
-- ARGV[4]  the lease's time to live in microseconds
-- ARGV[5]  the lease id
--
-- Reply: {ok (0|1), free slots after an acquire (else 0), retry_after_us, expiry_us}
-- where retry_after_us is, on a refused acquire, the time until the
-- earliest lease expires, and expiry_us the lease's expiry from now.
local limit = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local id = ARGV[5]
local key = KEYS[1]

redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now))

if mode == 'release' then
  local removed = redis.call('ZREM', key, id)
  keep_last(key)
  return {removed, 0, 0, 0}
end

if mode == 'renew' then
  if not redis.call('ZSCORE', key, id) then
    return {0, 0, 0, 0} -- expired, or never held
  end
  redis.call('ZADD', key, 'XX', int(now + ttl), id)
  keep_last(key)
  return {1, 0, 0, ttl}
end

local n = redis.call('ZCARD', key)
if n >= limit then
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return {0, 0, math.max(tonumber(first[2]) - now, 1), 0}
end
redis.call('ZADD', key, int(now + ttl), id)
keep_last(key)
return {1, limit - n - 1, 0, ttl}
