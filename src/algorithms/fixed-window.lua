--! algorithm
-- Fixed window: windows aligned to the clock; one value per identifier, the window's index and count.
-- Twin of fixed-window.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- fixed_window(key, now, op, cost, limit, window, max_debt)
--   -> allowed, remaining, resetMs, retryAfterMs (and for a charge: debt, cut off)
--   op: '0' limit, '1' peek, '2' refund, '3' charge, '7' takeUpTo; window in ms; max_debt: a charge's only.
-- A charge counts in the window as usage does, up to limit + max_debt: the debt ends with the window.
-- Its retryAfterMs is for a cost of 1.
--
-- The value is one integer, index x 2^21 + count, whenever both fit in it exactly: an index below
-- 2^32 (windows of a second or more, until 2106) and a limit (and count) below 2^21. Redis keeps such
-- a value inside the key's object, and INCRBY takes a request in one command. Otherwise the value is the
-- text "<index>:<count>". Either form is read whatever the policy, so changing one loses nothing.
local FIXED_WINDOW_SPAN = 2097152 -- 2^21: counts stay below it
local FIXED_WINDOW_INDICES = 4294967296 -- 2^32

local function fixed_window_read(stored)
  if not stored then return nil, 0 end
  local packed = tonumber(stored)
  if packed then
    local index = floor(packed / FIXED_WINDOW_SPAN)
    return index, packed - index * FIXED_WINDOW_SPAN
  end
  local index, count = string.match(stored, '^(%d+):(%d+)$')
  return tonumber(index), tonumber(count) or 0
end

-- On the server's clock, a key that already holds this window keeps its expiry, which is already
-- the window's end (`fresh`): SET ... KEEPTTL costs Redis much less than SET ... PX, which removes
-- and re-adds the expiry. (server_clock: see prelude.lua.)
local function fixed_window_write(key, index, count, limit, fresh, untilEnd)
  local value
  -- The count too, not only the limit: a limit lowered for one call may meet a larger count (refunds).
  if index < FIXED_WINDOW_INDICES and limit < FIXED_WINDOW_SPAN and count < FIXED_WINDOW_SPAN then
    value = string.format('%d', index * FIXED_WINDOW_SPAN + count)
  else
    value = string.format('%d:%d', index, count)
  end
  if fresh then
    call('SET', key, value, 'KEEPTTL')
  else
    set_for(key, value, untilEnd)
  end
end

-- Units left: none when a limit lowered for this call (a plan changed mid-window) is below the count.
local function fixed_window_left(limit, count)
  if count >= limit then return 0 end
  return limit - count
end

local function fixed_window(key, now, op, cost, limit, window, max_debt)
  -- takeUpTo (op '7'): as many units as are free, up to cost, at least 1; else a refusal of 1 that
  -- takes nothing. A look at one unit says how many are free, a limit of that many takes them; the
  -- one field is the units granted (the twin: algorithms/take-up-to.ts).
  if op == '7' then
    local _, free = fixed_window(key, now, '1', 1, limit, window, max_debt)
    local granted = free < cost and free or cost
    local allowed, remaining, reset, retry = fixed_window(key, now, '0', granted > 0 and granted or 1, limit, window, max_debt)
    return allowed, remaining, reset, retry, allowed == 1 and granted or 0
  end
  local index = floor(now / window)
  -- The key lives until its window ends, never longer.
  local untilEnd = ceil((index + 1) * window - now)
  if op == '0' and index < FIXED_WINDOW_INDICES and limit < FIXED_WINDOW_SPAN then
    -- One command for a request that fits: INCRBY adds the cost to the count in place. The value
    -- before it is the result minus the cost. (pcall: a text value or a key of another type fails
    -- INCRBY without writing, and is then read below; GET raises the WRONGTYPE to the caller.)
    local moved = redis.pcall('INCRBY', key, int(cost))
    if type(moved) == 'number' then
      local before = moved - cost
      local storedIndex = floor(before / FIXED_WINDOW_SPAN)
      -- 0 before: INCRBY created the key (a count of 0 is never stored).
      if before > 0 and storedIndex == index then
        local count = before - storedIndex * FIXED_WINDOW_SPAN
        if count + cost <= limit then
          -- A caller's clock may run backwards or slower than Redis's: set the expiry anew.
          if not server_clock then call('PEXPIRE', key, int(untilEnd)) end
          return 1, limit - count - cost, untilEnd, 0
        end
        -- A denied request consumes nothing.
        call('DECRBY', key, int(cost))
        return 0, fixed_window_left(limit, count), untilEnd, untilEnd
      end
      -- A new key, or a count from an earlier window (stale): the window starts empty, and a cost
      -- never exceeds the limit.
      set_for(key, string.format('%d', index * FIXED_WINDOW_SPAN + cost), untilEnd)
      return 1, limit - cost, untilEnd, 0
    end
  end
  local count = 0
  local fresh = false
  local storedIndex, storedCount = fixed_window_read(get(key))
  -- A count from an earlier window is stale: the window starts empty.
  if storedIndex == index then
    count = storedCount
    fresh = server_clock
  end
  local allowed = 1
  local retry = 0
  if op == '2' then
    count = count - cost
    if count < 0 then count = 0 end
    if count > 0 then
      fixed_window_write(key, index, count, limit, fresh, untilEnd)
    else
      call('DEL', key)
    end
  elseif op == '3' then
    local room = limit + max_debt - count
    if room < 0 then room = 0 end
    local taken = cost
    if taken > room then taken = room end
    if taken > 0 then
      count = count + taken
      fixed_window_write(key, index, count, limit, fresh, untilEnd)
    end
    if count + 1 > limit then retry = untilEnd end
    local debt = count - limit
    if debt < 0 then debt = 0 end
    return 1, fixed_window_left(limit, count), untilEnd, retry, debt, cost - taken
  elseif count + cost > limit then
    -- A denied request consumes nothing.
    allowed = 0
    retry = untilEnd
  elseif op == '0' then
    count = count + cost
    fixed_window_write(key, index, count, limit, fresh, untilEnd)
  end
  local reset = 0
  if count > 0 then reset = untilEnd end
  return allowed, fixed_window_left(limit, count), reset, retry
end
