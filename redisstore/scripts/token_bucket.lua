-- token_bucket.lua: GCRA, the one-timestamp form of a token bucket.
--
-- KEYS[1]  the key's theoretical arrival time (TAT), a string of microseconds
-- ARGV[1]  mode: "take" or "refund"          (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  emission interval T in microseconds: Period/Rate, rounded up
-- ARGV[4]  burst B
-- ARGV[5]  cost c
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. A request is admitted when max(TAT, now) + c·T − now
-- ≤ B·T. The key expires when the bucket is full again.
local T = tonumber(ARGV[3])
local B = tonumber(ARGV[4])
local c = tonumber(ARGV[5])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
  tat = now
end

if mode == 'refund' then
  tat = tat - c * T
  if tat <= now then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], int(tat), 'PX', int(math.ceil((tat - now) / 1000)))
  end
  return {1, 0, 0, 0}
end

local span = B * T
local nxt = tat + c * T
if nxt - now > span then
  return {0, math.floor(math.max(now + span - tat, 0) / T), nxt - span - now, tat - now}
end
-- One command sets the value and its time to live: the key expires when the
-- bucket is full again.
redis.call('SET', KEYS[1], int(nxt), 'PX', int(math.ceil((nxt - now) / 1000)))
return {1, math.floor(math.max(now + span - nxt, 0) / T), 0, nxt - now}
