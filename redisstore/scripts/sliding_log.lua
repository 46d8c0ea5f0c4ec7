-- sliding_log.lua: the exact sliding log as algorithm.SlidingLog keeps it:
-- (instant, running total) entries, oldest first; a request is one entry,
-- or joins the newest entry when both have the same instant (or, with a
-- precision, lie in one slot of time). The entries live in one string used
-- as a queue: new entries are appended, entries that leave the window are
-- skipped from the front, and once they are a quarter of the live ones the
-- live entries are copied to a second string, at most 32 KiB a call, which
-- then replaces the first (see compact). Every read is a GETRANGE of 16
-- bytes and the searches are binary, so a call is O(log entries) work and
-- writes at most one entry plus at most 32 KiB of the copy; never O(cost),
-- O(rate) nor O(entries).
--
-- KEYS[1]  a string: a 16-byte header, then 16-byte entries. Each is two
--          little-endian doubles (struct '<dd'), exact below 2^53. The
--          header is (dead, base): dead is the number of entries at the
--          front that have left, base the running total before the first
--          live one. An entry is (instant in microseconds, running total
--          of the units logged up to and including it); instants strictly
--          increase. At most ARGV[7] live entries.
-- ARGV[1]  mode: "take", "refund" or "peek" (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds
-- ARGV[4]  rate: units per period
-- ARGV[5]  cost
-- ARGV[6]  slot S in microseconds: the units admitted within one
--          epoch-aligned slot of S share an entry (S = 1: the same instant)
-- ARGV[7]  the most entries the log keeps; beyond, the two oldest merge
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. A request is admitted when the units logged in
-- (now−P, now] plus cost are at most rate. An entry leaves the window whole,
-- at its instant + P. The key expires when its newest entry leaves.
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local S = tonumber(ARGV[6])
local most = tonumber(ARGV[7])
local key = KEYS[1]

local size = redis.call('STRLEN', key)
local dead, base, n = 0, 0, 0
if size >= 16 then
  dead, base = struct.unpack('<dd', redis.call('GETRANGE', key, 0, 15))
  n = (size - 16) / 16 - dead
end

-- entry returns the instant and running total of live entry i (from 0).
local function entry(i)
  local off = 16 + (dead + i) * 16
  local at, cum = struct.unpack('<dd', redis.call('GETRANGE', key, off, off + 15))
  return at, cum
end

-- bisect returns the first entry in [lo, hi) for which before is false, or
-- hi, in O(log (hi - lo)) calls of before, which must hold for the entries
-- of a prefix of the range and for no other.
local function bisect(lo, hi, before)
  while lo < hi do
    local m = math.floor((lo + hi) / 2)
    if before(m) then
      lo = m + 1
    else
      hi = m
    end
  end
  return lo
end

-- first_after returns the first live entry from i on whose instant is after
-- cut, or n: the oldest is checked first, as most calls find it live.
local function first_after(i, cut)
  if i >= n or entry(i) > cut then
    return i
  end
  return bisect(i + 1, n, function(m) return entry(m) <= cut end)
end

-- first_reaching returns the first live entry from i on whose running total
-- is at least total; the newest's is.
local function first_reaching(i, total)
  return bisect(i, n - 1, function(m)
    local _, cum = entry(m)
    return cum < total
  end)
end

-- drop skips the k oldest live entries and their units.
local function drop(k)
  if k > 0 then
    local _, cum = entry(k - 1)
    base, dead, n = cum, dead + k, n - k
  end
end

-- The log is compacted into a second string, side, at most chunk bytes of
-- entries a call, so that no call's work grows with the log: side starts
-- as a header holding the index (in key) of the first entry it copies,
-- then takes key's entries in order, all but the newest (which a call may
-- still change in place) until the call that finds at most chunk bytes
-- left: that call copies them, the newest included, writes side's header
-- and renames side over key. side's name keeps key's hash tag, so that it
-- is in key's slot. Meanwhile key stays the log, as if nothing were under
-- way. A key with no hash tag of its own (the caller's key starts with
-- "}", so the braces the store adds tag nothing and Redis hashes the whole
-- name) has no side that shares its slot: side is nil, and such a log is
-- compacted in place, in one call (a key the service and the middleware
-- never build: theirs start with a prefix).
local function tagged(k)
  local open = string.find(k, '{', 1, true)
  if not open then
    return false
  end
  local close = string.find(k, '}', open + 1, true)
  return close ~= nil and close > open + 1
end
local side = nil
if tagged(key) then
  side = key .. '~compact'
end
local chunk = 32768

-- compact copies the next chunk of entries into side, starting it when
-- the dead entries are a quarter of the live ones (each entry is then
-- copied at most about four times, amortised, and the string holds at
-- most about a quarter more than the live entries, plus what dies during
-- the copy), and renames it over key once it has them all; it reports
-- whether it did.
local function compact()
  if not side then
    if dead < 16 or 4 * dead < n then
      return false
    end
    local live = redis.call('GETRANGE', key, 16 + dead * 16, -1)
    dead = 0
    redis.call('SET', key, struct.pack('<dd', dead, base) .. live)
    return true
  end
  local sz = redis.call('STRLEN', side)
  if sz < 16 then
    if dead < 16 or 4 * dead < n then
      return false
    end
    redis.call('SET', side, struct.pack('<dd', dead, 0))
    sz = 16
  end
  local from = struct.unpack('<d', redis.call('GETRANGE', side, 0, 7))
  local at = from + (sz - 16) / 16 -- the next entry of key to copy
  local total = dead + n
  if from > dead or at > total then -- not a copy of this log: start over
    redis.call('DEL', side)
    return false
  end
  local left = (total - at) * 16
  if left > chunk then
    local off = 16 + at * 16
    local last = math.min(off + chunk, 16 + (total - 1) * 16) - 1
    if last >= off then
      redis.call('APPEND', side, redis.call('GETRANGE', key, off, last))
    end
    redis.call('PEXPIRE', side, redis.call('PTTL', key))
    return false
  end
  if left > 0 then
    local off = 16 + at * 16
    redis.call('APPEND', side, redis.call('GETRANGE', key, off, off + left - 1))
  end
  dead = dead - from
  redis.call('SETRANGE', side, 0, struct.pack('<dd', dead, base))
  redis.call('RENAME', side, key)
  return true
end

-- save writes the header, compacting (see compact), and sets the key to
-- expire when the newest entry leaves the window; it deletes the key when
-- no entry is left.
local function save()
  if not write then
    return
  end
  if n == 0 then
    redis.call('DEL', key)
    if side then
      redis.call('DEL', side)
    end
    return
  end
  redis.call('SETRANGE', key, 0, struct.pack('<dd', dead, base))
  compact()
  local newest = entry(n - 1)
  redis.call('PEXPIRE', key, int(math.ceil((newest + P - now) / 1000)))
end

-- at is the instant logged: never before the newest, so that the log stays
-- ordered if the clock steps back.
local at = now
if n > 0 then
  local newest = entry(n - 1)
  if newest > now then
    at = newest
  end
end
-- The entries at or before now − P have left the window; they are the
-- oldest. Skip them.
local before = n
drop(first_after(0, now - P))
local dropped = n < before
local sum = 0
if n > 0 then
  local _, cum = entry(n - 1)
  sum = cum - base
end

if mode == 'refund' then
  -- Remove cost units from the oldest live entries, as
  -- algorithm.SlidingLog.Refund does: the units kept then carry instants no
  -- earlier than the real ones, so no window holds more than rate. An entry
  -- that keeps some keeps its instant.
  local c = math.min(cost, sum)
  if c > 0 then
    local nb = base + c
    local k = first_reaching(0, nb)
    local _, cum = entry(k)
    if cum == nb then
      k = k + 1
    end
    drop(k)
    base = nb
  end
  save()
  return {1, 0, 0, 0}
end

if cost > rate - sum then
  -- Wait until enough of the oldest entries have left the window: the
  -- first whose running total passes base + sum + cost − rate (cost ≤ rate,
  -- so it exists). The entries that have left are dropped for good, as the
  -- memory store drops them, should the clock step back.
  local i = first_reaching(0, base + sum + cost - rate)
  local ready = entry(i)
  local newest = entry(n - 1)
  if dropped then
    save()
  end
  return {0, math.max(rate - sum, 0), ready + P - now, newest + P - now}
end

if mode == 'peek' then -- within the limit: nothing to log
  if n == 0 then
    return {1, rate, 0, 0}
  end
  local newest = entry(n - 1)
  return {1, rate - sum, 0, newest + P - now}
end

-- math.fmod is exact on integers below 2^53, where % (a − floor(a/b)·b)
-- may round.
if n == 0 then
  -- A fresh string, also when every entry has left: nothing dead to keep,
  -- and nothing to compact.
  redis.call('SET', key, struct.pack('<dd', 0, 0))
  if side then
    redis.call('DEL', side)
  end
  dead, base = 0, 0
end
local merged = false
if n > 0 then
  local newest, cum = entry(n - 1)
  if newest == at or at - math.fmod(at, S) == newest - math.fmod(newest, S) then
    redis.call('SETRANGE', key, 16 + (dead + n - 1) * 16, struct.pack('<dd', at, cum + cost))
    merged = true
  end
end
if not merged then
  local total = base + cost
  if n > 0 then
    local _, cum = entry(n - 1)
    total = cum + cost
  end
  if n >= most then
    -- Only after a change of limit or a clock that stepped back: merge the
    -- two oldest entries, keeping the later instant (the oldest's units
    -- leave with the next).
    dead, n = dead + 1, n - 1
  end
  redis.call('APPEND', key, struct.pack('<dd', at, total))
  n = n + 1
end
save()
return {1, rate - sum - cost, 0, at + P - now}
