--! algorithm reads-ahead
-- Sliding window counter: the previous and current clock-aligned windows, weighted by overlap.
-- One value per identifier, "<current window index>:<previous count>:<current count>".
-- Twin of sliding-window.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- sliding_window(key, now, op, cost, limit, window, max_debt)
--   -> allowed, remaining, resetMs, retryAfterMs (and for a charge: debt, cut off)
--   op: '0' limit, '1' peek, '2' refund, '3' charge, '7' takeUpTo; window in ms; max_debt: a charge's only.
-- A charge counts in the current window as usage does, up to limit + max_debt in the estimate; its
-- retryAfterMs is for a cost of 1.

-- On the server's clock the value is one integer when the counts fit, (index mod 2^11) x 2^42 +
-- previous x 2^21 + current, which Redis keeps inside the key's object: a request in a window the
-- key already holds is then one INCRBY, with no text to format or parse. Only the index's low 11 bits
-- are kept: such a key was written on the server's clock and expires by the end of the next window,
-- so it never meets an index 2,048 windows on (on a caller's clock, which Redis's expiries do not
-- follow, every write is the text form). Either form is read whatever the clock.
local SLIDING_WINDOW_SPAN = 2097152 -- 2^21: counts stay below it
local SLIDING_WINDOW_PAIR = 4398046511104 -- 2^42: the two counts
local SLIDING_WINDOW_TURN = 2048 -- 2^11: the index's low bits

-- Milliseconds until previous x weight + current leaves room for cost (it does not now).
local function sliding_window_until_room(previous, current, cost, limit, window, elapsed)
  if current + cost <= limit then
    return ceil((window - elapsed) - (limit - current - cost) * window / previous)
  end
  local into = window - (limit - cost) * window / current
  if into < 0 then into = 0 end
  return ceil((window - elapsed) + into)
end

local function sliding_window(key, now, op, cost, limit, window, max_debt)
  -- takeUpTo (op '7'): as many units as are free, up to cost, at least 1; else a refusal of 1 that
  -- takes nothing. A look at one unit says how many are free, a limit of that many takes them; the
  -- one field is the units granted (the twin: algorithms/take-up-to.ts).
  if op == '7' then
    local _, free = sliding_window(key, now, '1', 1, limit, window, max_debt)
    local granted = free < cost and free or cost
    local allowed, remaining, reset, retry = sliding_window(key, now, '0', granted > 0 and granted or 1, limit, window, max_debt)
    return allowed, remaining, reset, retry, allowed == 1 and granted or 0
  end
  local index = floor(now / window)
  local elapsed = now - index * window
  -- Share of the previous window that still overlaps the sliding window ending now.
  local weight = (window - elapsed) / window
  local previous, current = 0, 0
  -- Whether the key already lives until the end of the next window (it held a current count of this
  -- window, on the server's clock: see server_clock in prelude.lua): a write that keeps a current
  -- count then leaves the expiry where it is, with KEEPTTL, which costs Redis much less than
  -- SET ... PX (that removes and re-adds the expiry).
  local lasting = false
  -- Whether the key holds this window's counts as one integer (then INCRBY can add to the current count).
  local packed = false
  local stored = get(key)
  if stored then
    local value = tonumber(stored)
    if value then
      local turn = floor(value / SLIDING_WINDOW_PAIR)
      local counts = value - turn * SLIDING_WINDOW_PAIR
      local storedPrevious = floor(counts / SLIDING_WINDOW_SPAN)
      local storedCurrent = counts - storedPrevious * SLIDING_WINDOW_SPAN
      if turn == index % SLIDING_WINDOW_TURN then
        previous, current = storedPrevious, storedCurrent
        lasting = server_clock and current > 0
        packed = true
      elseif turn == (index - 1) % SLIDING_WINDOW_TURN then
        previous = storedCurrent
      end
    else
      local storedIndex, storedPrevious, storedCurrent = string.match(stored, '^(%d+):(%d+):(%d+)$')
      storedIndex = tonumber(storedIndex)
      if storedIndex == index then
        previous, current = tonumber(storedPrevious), tonumber(storedCurrent)
        lasting = server_clock and current > 0
      elseif storedIndex == index - 1 then
        previous = tonumber(storedCurrent)
      end
    end
  end
  local allowed = 1
  local retry = 0
  local write = false
  local debt, cut = nil, nil
  if op == '2' then
    current = current - cost
    if current < 0 then current = 0 end
    write = true
  elseif op == '3' then
    local room = floor(limit + max_debt - (previous * weight + current) + EPSILON)
    if room < 0 then room = 0 end
    local taken = cost
    if taken > room then taken = room end
    current = current + taken
    write = taken > 0
    local estimate = previous * weight + current
    if estimate + 1 > limit + EPSILON then
      retry = sliding_window_until_room(previous, current, 1, limit, window, elapsed)
    end
    debt = ceil(estimate - limit - EPSILON)
    if debt < 0 then debt = 0 end
    cut = cost - taken
  else
    local estimate = previous * weight + current
    if estimate + cost > limit + EPSILON then
      -- A denied request consumes nothing. Find when the estimate leaves room for cost.
      allowed = 0
      retry = sliding_window_until_room(previous, current, cost, limit, window, elapsed)
    elseif op == '0' then
      current = current + cost
      write = true
    end
  end
  -- The current count matters until the end of the next window; the previous one until this one ends.
  local keepFor = 0
  if current > 0 then
    keepFor = ceil(2 * window - elapsed)
  elseif previous > 0 then
    keepFor = ceil(window - elapsed)
  end
  if write then
    local fits = server_clock and previous < SLIDING_WINDOW_SPAN and current < SLIDING_WINDOW_SPAN
    if lasting and current > 0 and packed and fits and op == '0' then
      -- The key holds this window's counts, its expiry already the next window's end: add in place.
      call('INCRBY', key, int(cost))
    elseif keepFor > 0 then
      local value
      if fits then
        value = string.format('%d', (index % SLIDING_WINDOW_TURN) * SLIDING_WINDOW_PAIR
          + previous * SLIDING_WINDOW_SPAN + current)
      else
        value = string.format('%d:%d:%d', index, previous, current)
      end
      if lasting and current > 0 then
        call('SET', key, value, 'KEEPTTL')
      else
        set_for(key, value, keepFor)
      end
    else
      call('DEL', key)
    end
  end
  local remaining = floor(limit - (previous * weight + current) + EPSILON)
  if remaining < 0 then remaining = 0 end
  return allowed, remaining, keepFor, retry, debt, cut
end
