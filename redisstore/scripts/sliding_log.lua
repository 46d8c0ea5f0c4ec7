-- sliding_log.lua: the exact sliding window, one sorted-set member per
-- admitted unit.
--
-- KEYS[1]  a sorted set: score = the unit's instant in microseconds,
--          member = "<instant>:<sequence>", the sequence zero-padded so that
--          members of one instant sort in the order they were added
-- ARGV[1]  mode: "take" or "refund"          (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds
-- ARGV[4]  rate: units per period (the set never holds more)
-- ARGV[5]  cost
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. A request is admitted when the units logged in
-- (now−P, now] plus cost are at most rate. The key expires when its newest
-- unit leaves the window.
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local key = KEYS[1]

-- at is the instant logged: never before the newest, so that the log stays
-- ordered if the clock steps back. The trim below keeps the newest unit
-- whenever it keeps any, so newest still holds when n > 0 after it.
local at = now
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) > now then
  at = tonumber(newest[2])
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - P))
local n = redis.call('ZCARD', key)

if mode == 'refund' then
  if n > 0 then
    redis.call('ZREMRANGEBYRANK', key, -math.min(cost, n), -1)
  end
  newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] then
    expire(key, tonumber(newest[2]) + P - now)
  end
  return {1, 0, 0, 0}
end

if n + cost > rate then
  -- Wait until the k-th oldest unit leaves the window.
  local k = n + cost - rate
  local kth = redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')
  return {0, math.max(rate - n, 0), tonumber(kth[2]) + P - now, tonumber(newest[2]) + P - now}
end
-- Sequence numbers continue from the newest member when it was logged at
-- the same instant, so that no member name is ever reused (a reused name
-- would update, not add, and the unit would go uncounted). A newest logged
-- at at (never before now) survived the trim.
local seq = 0
if newest[2] and tonumber(newest[2]) == at then
  seq = tonumber(string.match(newest[1], ':(%d+)$')) or n
end
-- ZADD in batches: unpack is bounded by Lua's C stack.
local i = 1
while i <= cost do
  local args = {}
  for j = i, math.min(i + 499, cost) do
    args[#args + 1] = int(at)
    args[#args + 1] = string.format('%s:%012d', int(at), seq + j)
  end
  redis.call('ZADD', key, unpack(args))
  i = i + 500
end
expire(key, at + P - now)
return {1, rate - n - cost, 0, at + P - now}
