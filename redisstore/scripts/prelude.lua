-- prelude.lua: prepended to every script of this folder before it is loaded.
--
-- ARGV[1] is the mode: "take" decides a request, "refund" gives units back.
-- ARGV[2] is the instant in microseconds since the Unix epoch. Production
-- always sends "" so that the script reads the store's own clock (TIME);
-- only the test suite sends an instant, to control time.
--
-- Every number here is an integer below 2^53 (microseconds since the epoch
-- are about 1.8e15), which a Lua double holds exactly; the Go side refuses
-- limits that would need more.
local mode = ARGV[1]
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- int formats an integral number for Redis without losing digits.
local function int(x)
  return string.format('%.0f', x)
end

-- expire sets the key's time to live to us microseconds, rounded up to
-- milliseconds, or deletes it when nothing is left to remember.
local function expire(key, us)
  if us <= 0 then
    redis.call('DEL', key)
  else
    redis.call('PEXPIRE', key, int(math.ceil(us / 1000)))
  end
end
