-- prelude.lua: prepended to every script of this folder before it is loaded;
-- it reads the mode and the clock, and holds the helpers more than one
-- script uses.
--
-- ARGV[1] is the mode: "take" decides a request, "refund" gives units back,
-- "peek" answers as "take" would for a cost of 0 (the cost ARGV the Go side
-- sends then) and writes nothing: no key is created, changed, deleted or
-- given a new expiry (see sluice.Peeker).
-- ARGV[2] is the instant in microseconds since the Unix epoch. Production
-- always sends "" so that the script reads the store's own clock (TIME);
-- only the test suite sends an instant, to control time.
--
-- Every number the scripts keep is an integer below 2^53 (microseconds
-- since the epoch are about 1.8e15), which a Lua double holds exactly;
-- products that may pass 2^53 go through muldiv below, sums that may are
-- written as differences, and the Go side refuses, through ValidateLimit,
-- the few limits that would still need more.
--
-- The helpers are defined once per script call: batch.lua (see
-- coalesce.go) places the part of this file above the marker line
-- "--DECISION--" before its loop and runs the rest, then the algorithm's
-- script, once per decision, so that mode, write and now, which the
-- helpers read, are each decision's.
local mode -- ARGV[1]
local write -- every write below is skipped on a peek
local now -- ARGV[2], or the server's clock

-- int formats an integral number for Redis without losing digits.
local function int(x)
  return string.format('%.0f', x)
end

-- floor_mod returns x mod m in [0, m), exactly, for a negative x too
-- (before the Unix epoch, or a sub-window's number there), where
-- math.fmod keeps x's sign.
local function floor_mod(x, m)
  local r = math.fmod(x, m)
  if r < 0 then
    r = r + m
  end
  return r
end

-- expire sets the key's time to live to us microseconds, rounded up to
-- milliseconds, or deletes it when nothing is left to remember.
local function expire(key, us)
  if not write then
    return
  end
  if us <= 0 then
    redis.call('DEL', key)
  else
    redis.call('PEXPIRE', key, int(math.ceil(us / 1000)))
  end
end

-- keep_last lets the sorted set at key, whose scores are the instants its
-- members expire, expire with its last member (or deletes it when that
-- one has expired); an empty set is gone already.
local function keep_last(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    expire(key, tonumber(last[2]) - now)
  end
end

-- muldiv returns ⌊a·b/c⌋ and a·b mod c, exactly, for integers a, b ≥ 0 and
-- c > 0 below 2^53 whose quotient is below 2^53, however large a·b: above
-- 2^53 it works bit by bit on a, keeping the remainder below c, so that no
-- intermediate passes 2^53. (math.fmod is exact; % may round.)
local function muldiv(a, b, c)
  local x = a * b
  if x < 9007199254740992 then
    local r = math.fmod(x, c)
    return (x - r) / c, r
  end
  local rb = math.fmod(b, c)
  local q0 = a * ((b - rb) / c) -- a·⌊b/c⌋; then ⌊a·rb/c⌋ with rb < c
  local bits = {}
  while a > 0 do
    bits[#bits + 1] = math.fmod(a, 2)
    a = (a - bits[#bits]) / 2
  end
  local q, r = 0, 0
  for i = #bits, 1, -1 do
    q = 2 * q
    if r >= c - r then
      r, q = r - (c - r), q + 1
    else
      r = 2 * r
    end
    if bits[i] == 1 then
      if r >= c - rb then
        r, q = r - (c - rb), q + 1
      else
        r = r + rb
      end
    end
  end
  return q0 + q, r
end

-- muldivceil returns ⌈a·b/c⌉, under muldiv's conditions.
local function muldivceil(a, b, c)
  local q, r = muldiv(a, b, c)
  if r > 0 then
    q = q + 1
  end
  return q
end

-- overcount returns count with cost added, past rate if need be but not
-- past twice it (nor 2^53): a "charge" of the window algorithms counts
-- units already spent elsewhere, which may not fit.
local function overcount(count, cost, rate)
  local cap = math.min(2 * rate, 9007199254740992)
  if count < cap then
    count = count + math.min(cost, cap - count)
  end
  return count
end

-- window_take decides a take or a peek of c units on a counter of n units
-- in a window ending at e (the hash, e and n, of fixed_window.lua and
-- calendar_window.lua), saves the count on an admitted take, and returns
-- the reply. held says that the key holds e already, with the expiry
-- written when that window started (at e): an admitted take then adds c
-- to the stored count alone, one command instead of three. A charge has
-- saved its count already and comes with c = 0 and held: it is answered
-- as a peek.
local function window_take(key, e, n, rate, c, held)
  if c > rate - n then
    return {0, math.max(rate - n, 0), e - now, e - now}
  end
  n = n + c
  if write then
    if not held then
      redis.call('HSET', key, 'e', int(e), 'n', int(n))
      expire(key, e - now)
    elseif c > 0 then
      redis.call('HINCRBY', key, 'n', int(c))
    end
  end
  return {1, rate - n, 0, e - now}
end

-- window_refund gives c units back to a counter of n units (the hash's n,
-- as window_take keeps it) when live, that is when the window it counts
-- holds now, never below 0, and returns the reply.
local function window_refund(key, n, c, live)
  if live and n > 0 then
    redis.call('HSET', key, 'n', int(math.max(n - c, 0)))
  end
  return {1, 0, 0, 0}
end

--DECISION--
-- Each decision starts here.
mode = ARGV[1]
write = mode ~= 'peek'
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
