-- leaky_bucket.lua: the leaky bucket as a meter, with NGINX limit_req's
-- accounting: milli-requests, a millisecond clock, rejected requests not
-- charged.
--
-- KEYS[1]  a hash: x = excess in milli-requests after the last admitted
--          request, l = its time in Unix milliseconds, u = the instant in
--          microseconds at which the bucket has drained empty
-- ARGV[1]  mode: "take", "refund" or "peek" (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  rate in milli-requests per second, truncated as NGINX does
-- ARGV[4]  burst: requests admitted back to back (NGINX's burst + 1)
-- ARGV[5]  cost c
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. With lvl the level drained to now,
-- excess = lvl + 1000·(c−1) is admitted when it is at most (burst−1)·1000.
-- The key expires when the bucket has drained empty.
local rate = tonumber(ARGV[3])
local burst = (tonumber(ARGV[4]) - 1) * 1000
local cost = tonumber(ARGV[5])
local st = redis.call('HMGET', KEYS[1], 'x', 'l', 'u')
local x = tonumber(st[1] or '0')
local last = tonumber(st[2] or '0')
local untl = tonumber(st[3] or '0')
local nowMs = math.floor(now / 1000)

-- The level (excess + 1000, at least 0) drained to nowMs, and the elapsed
-- milliseconds used, with NGINX's handling of a clock that jumps.
local lvl, ms
if untl == 0 then
  lvl, ms = 0, 1
else
  ms = nowMs - last
  if ms < -60000 then
    ms = 1
  elseif ms < 0 then
    ms = 0
  end
  lvl = x + 1000
  if ms > math.floor(lvl * 1000 / rate) then
    lvl = 0
  else
    lvl = math.max(lvl - math.floor(rate * ms / 1000), 0)
  end
end

local function save()
  untl = (last + math.ceil((x + 1000) * 1000 / rate)) * 1000
  if write then
    redis.call('HSET', KEYS[1], 'x', int(x), 'l', int(last), 'u', int(untl))
    expire(KEYS[1], untl - now)
  end
end

if mode == 'refund' then
  lvl = lvl - 1000 * cost
  if lvl <= 0 then
    redis.call('DEL', KEYS[1])
  else
    x = lvl - 1000
    if ms ~= 0 then
      last = nowMs
    end
    save()
  end
  return {1, 0, 0, 0}
end

local excess = lvl + 1000 * (cost - 1)
if excess > burst then
  local remaining = 0
  if lvl <= burst then
    remaining = math.floor((burst - lvl) / 1000) + 1
  end
  local need = x + 1000 + 1000 * (cost - 1) - burst
  local wait = (last + math.ceil(need * 1000 / rate)) * 1000 - now
  return {0, remaining, math.max(wait, 1), math.max(untl - now, 0)}
end
x = excess
if ms ~= 0 then
  last = nowMs
end
save()
-- (A peek at an empty bucket has untl at most now.)
return {1, math.floor((burst - excess) / 1000), 0, math.max(untl - now, 0)}
