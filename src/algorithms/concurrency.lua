--! algorithm
-- Concurrency: leases of slots, one sorted set per identifier. Each slot a lease holds is a member
-- scored by the lease's expiry in ms (its id, then id/2 .. id/cost); the member '#' keeps the last
-- fencing token, scored minus the token: expiries are never negative, so trimming the scores from 0
-- to now frees every expired slot and never the token.
-- Twin of concurrency.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- concurrency(key, now, op, cost, limit, lease_ms, a, b) -> allowed, remaining, resetMs, retryAfterMs,
--   then the operation's fields, up to three numbers (as every algorithm returns them: single.lua)
--   op '0' acquires cost slots for the new lease a        fields: token, expiresAt, reclaimed
--      '1' peeks (trims nothing, writes nothing)           no fields
--      '5' releases lease a                                fields: released, reclaimed
--      '6' extends lease a to b ms from now ('' for lease_ms)  fields: extended, expiresAt, reclaimed
--   reclaimed: slots of leases that had expired unreleased, freed by this call.
local LEASE_TOKEN = '#'

-- The last token and the rank of the first slot (1 when the token member sorts first), or 0, 0.
local function lease_token(key)
  local stored = call('ZSCORE', key, LEASE_TOKEN)
  if stored then return -tonumber(stored), 1 end
  return 0, 0
end

-- The latest expiry among the slots, or nil: the highest score, unless it is the token's.
local function lease_latest(key)
  local top = call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[1] and top[1] ~= LEASE_TOKEN then return tonumber(top[2]) end
  return nil
end

local function lease_reset(key, now)
  local latest = lease_latest(key)
  if latest and latest > now then return ceil(latest - now) end
  return 0
end

-- When the key's life is over: a lease length past its last slot (so that a call in that time
-- counts the slots that lapsed unreleased), and not before the clock has passed the last token's
-- millisecond (a token issued after the key is gone, read from the same clock, is then greater).
local function lease_until(key, token, lease_ms)
  local keep_until = floor(token / 1000) + 1
  local latest = lease_latest(key)
  if latest and latest + lease_ms > keep_until then keep_until = latest + lease_ms end
  return keep_until
end

local function lease_keep(key, now, token, lease_ms)
  local ttl = ceil(lease_until(key, token, lease_ms) - now)
  if ttl < 1 then ttl = 1 end
  call('PEXPIRE', key, int(ttl))
end

-- The last token and the first slot's rank, as of now: a key whose life is over by this clock is
-- forgotten (deleted when `write`), as the server would have expired it by its own clock (a
-- caller's clock may run ahead of it).
local function lease_open(key, now, lease_ms, write)
  local last, first = lease_token(key)
  if first == 1 and now >= lease_until(key, last, lease_ms) then
    if write then call('DEL', key) end
    return 0, 0
  end
  return last, first
end

local function lease_remaining(limit, used)
  if used >= limit then return 0 end
  return limit - used
end

-- The wait until `needed` slots have expired: the needed-th soonest expiry among the held slots.
local function lease_wait(key, now, first, needed)
  local rank = first + needed - 1
  return ceil(tonumber(call('ZRANGE', key, rank, rank, 'WITHSCORES')[2]) - now)
end

local function lease_acquire(key, now, cost, limit, lease_ms, id)
  local last, first = lease_open(key, now, lease_ms, true)
  local reclaimed = call('ZREMRANGEBYSCORE', key, 0, string.format('%.17g', now))
  local used = call('ZCARD', key) - first
  if used + cost > limit then
    -- A refused acquisition takes nothing.
    local wait = lease_wait(key, now, first, used + cost - limit)
    return 0, lease_remaining(limit, used), lease_reset(key, now), wait, 0, 0, reclaimed
  end
  -- The clock's microsecond, or one more than the last token when the clock has not moved past it.
  local token = floor(now * 1000 + 0.5)
  if token <= last then token = last + 1 end
  if token < 1 then token = 1 end
  local expires = now + lease_ms
  -- ZADD in slices: Lua's unpack has a small stack.
  local done = 0
  while done < cost do
    local slice = {}
    local upto = done + 500
    if upto > cost then upto = cost end
    for j = done + 1, upto do
      slice[#slice + 1] = expires
      if j == 1 then slice[#slice + 1] = id else slice[#slice + 1] = id .. '/' .. j end
    end
    call('ZADD', key, unpack(slice))
    done = upto
  end
  call('ZADD', key, -token, LEASE_TOKEN)
  lease_keep(key, now, token, lease_ms)
  return 1, lease_remaining(limit, used + cost), lease_reset(key, now), 0, token, ceil(expires), reclaimed
end

local function lease_peek(key, now, cost, limit, lease_ms)
  local _, first = lease_open(key, now, lease_ms, false)
  if first == 0 then return 1, limit, 0, 0 end
  local live = '(' .. string.format('%.17g', now)
  local used = call('ZCOUNT', key, live, '+inf')
  if used + cost > limit then
    local soonest = call('ZRANGEBYSCORE', key, live, '+inf', 'WITHSCORES', 'LIMIT', used + cost - limit - 1, 1)
    return 0, lease_remaining(limit, used), lease_reset(key, now), ceil(tonumber(soonest[2]) - now)
  end
  return 1, lease_remaining(limit, used), lease_reset(key, now), 0
end

local function lease_release(key, now, limit, lease_ms, id)
  lease_open(key, now, lease_ms, true)
  local reclaimed = call('ZREMRANGEBYSCORE', key, 0, string.format('%.17g', now))
  local released = 0
  if call('ZREM', key, id) == 1 then
    released = 1
    local j = 2
    while call('ZREM', key, id .. '/' .. j) == 1 do j = j + 1 end
  end
  local _, first = lease_token(key)
  local used = call('ZCARD', key) - first
  return 1, lease_remaining(limit, used), lease_reset(key, now), 0, released, reclaimed
end

local function lease_extend(key, now, limit, lease_ms, id, ms)
  lease_open(key, now, lease_ms, true)
  local reclaimed = call('ZREMRANGEBYSCORE', key, 0, string.format('%.17g', now))
  local extended, expires_at = 0, 0
  if call('ZSCORE', key, id) then
    local expires = now + (tonumber(ms) or lease_ms)
    call('ZADD', key, 'XX', expires, id)
    local j = 2
    while call('ZSCORE', key, id .. '/' .. j) do
      call('ZADD', key, 'XX', expires, id .. '/' .. j)
      j = j + 1
    end
    extended, expires_at = 1, ceil(expires)
    lease_keep(key, now, (lease_token(key)), lease_ms)
  end
  local _, first = lease_token(key)
  local used = call('ZCARD', key) - first
  return 1, lease_remaining(limit, used), lease_reset(key, now), 0, extended, expires_at, reclaimed
end

local function concurrency(key, now, op, cost, limit, lease_ms, a, b)
  if op == '0' then return lease_acquire(key, now, cost, limit, lease_ms, a) end
  if op == '1' then return lease_peek(key, now, cost, limit, lease_ms) end
  if op == '5' then return lease_release(key, now, limit, lease_ms, a) end
  if op == '6' then return lease_extend(key, now, limit, lease_ms, a, b) end
  error('sluice: concurrency() has no operation ' .. tostring(op))
end
