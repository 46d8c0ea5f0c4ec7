-- roster.lua: the live members of a fleet, each process announcing itself
-- (a heartbeat) so that every process can count the others. A sorted set,
-- so that a member that stops announcing (a crashed process) leaves by
-- itself once its time to live has passed.
--
-- KEYS[1]  a sorted set: member = instance id, score = expiry in microseconds
-- ARGV[1]  mode: "announce" or "leave"             (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""               (see prelude.lua)
-- ARGV[3]  the member's time to live in microseconds
-- ARGV[4]  the member (instance id)
-- ARGV[5]  the most members counted
-- ARGV[6]  the longest time to live any member may have, in microseconds
--
-- Reply: {live members, counted at most ARGV[5] (0 after a leave)}
--
-- Junk in the set (written by anyone who can write to Redis) costs a
-- bounded amount: a key of another type is deleted; members whose expiry
-- lies further ahead than ARGV[6] (no announce writes that) and members
-- that have expired are removed, at most `sweep` of each per call; and the
-- count is at most ARGV[5], read with ZCOUNT, which reads no member. Junk
-- with a plausible expiry counts until that expiry, at most ARGV[6] after
-- it was written.
local ttl = tonumber(ARGV[3])
local id = ARGV[4]
local most = tonumber(ARGV[5])
local horizon = tonumber(ARGV[6])
local key = KEYS[1]
local sweep = 1000

local kind = redis.call('TYPE', key)['ok']
if kind ~= 'zset' and kind ~= 'none' then
  redis.call('DEL', key)
end

local function remove(lo, hi)
  local junk = redis.call('ZRANGEBYSCORE', key, lo, hi, 'LIMIT', 0, sweep)
  if #junk > 0 then
    redis.call('ZREM', key, unpack(junk))
  end
end
remove('-inf', int(now))
remove('(' .. int(now + horizon), '+inf')

if mode == 'leave' then
  redis.call('ZREM', key, id)
  keep_last(key)
  return {0}
end

redis.call('ZADD', key, int(now + ttl), id)
keep_last(key)
local n = redis.call('ZCOUNT', key, '(' .. int(now), int(now + horizon))
return {math.min(n, most)}
