-- envoy_fixed_window.lua: a fixed window in envoyproxy/ratelimit's layout,
-- so that both services can count in one Redis (Config.KeyFormat envoy).
--
-- KEYS[1]  the counter, a plain integer: the caller's key followed by the
--          window start in Unix seconds, the one ARGV[6] names
-- ARGV[1]  mode: "take", "refund" or "peek" (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds, a whole number of seconds
-- ARGV[4]  rate: units per window
-- ARGV[5]  cost c
-- ARGV[6]  the window start KEYS[1] was built for, in Unix seconds
-- ARGV[7]  the expiry jitter in seconds, added to P
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. When the window that holds now is not ARGV[6] (the
-- caller guessed it from another clock), nothing is touched and the reply
-- is {2, now in Unix seconds, 0, 0}, for the caller to try again.
--
-- Unlike envoyproxy/ratelimit, which INCRBYs every hit, a denied take
-- writes nothing: denials never spend units that later requests could have
-- had. The counter's expiry is refreshed on every admitted take, as
-- envoyproxy/ratelimit refreshes it on every hit.
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local c = tonumber(ARGV[5])
local start = now - math.fmod(now, P)
if start ~= tonumber(ARGV[6]) * 1000000 then
  return {2, (now - math.fmod(now, 1000000)) / 1000000, 0, 0}
end
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n == nil then
  return redis.error_reply('the counter ' .. KEYS[1] .. ' is not an integer')
end
local reset = start + P - now

if mode == 'refund' then
  if n > 0 then
    redis.call('DECRBY', KEYS[1], int(math.min(c, n)))
  end
  return {1, 0, 0, 0}
end

if c > rate - n then
  return {0, math.max(rate - n, 0), reset, reset}
end
if write then
  redis.call('INCRBY', KEYS[1], int(c))
  redis.call('EXPIRE', KEYS[1], int(P / 1000000 + tonumber(ARGV[7])))
end
return {1, rate - n - c, 0, reset}
