-- GCRA token bucket: one decision, the same script for every client measured
-- by redis_test.go and redis-ceiling.sh.
--
-- KEYS[1]  the bucket's key; it holds the theoretical arrival time (TAT) in
--          microseconds of the store's clock.
-- ARGV[1]  emission interval in microseconds (1 / rate), an integer > 0
-- ARGV[2]  burst, in units of cost, an integer > 0
-- ARGV[3]  cost of this request, an integer >= 0
--
-- Reply: {allowed (1 or 0), remaining, retry_us, reset_us}, all integers.
-- remaining is what the bucket holds after this decision; retry_us is how long
-- until this cost would be admitted (0 when allowed); reset_us is how long
-- until the bucket is full again.
--
-- The clock is the server's (TIME), never the caller's. An admitted request
-- stores the new TAT with an expiry at the moment the bucket is full again, so
-- an idle key disappears once it is indistinguishable from a fresh one.
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end

local limit = burst * interval
local new = tat + cost * interval
if new - now <= limit then
  local ttl_us = new - now
  if ttl_us > 0 then
    redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.ceil(ttl_us / 1000))
  end
  return {1, math.floor((limit - ttl_us) / interval), 0, ttl_us}
end
return {0, math.floor((limit - (tat - now)) / interval), new - now - limit, tat - now}
