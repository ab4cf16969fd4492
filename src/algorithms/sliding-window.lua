-- Sliding window counter: the previous and current clock-aligned windows, weighted by overlap.
-- One value per identifier, "<current window index>:<previous count>:<current count>".
-- Twin of sliding-window.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- sliding_window(key, now, op, cost, limit, window) -> allowed, remaining, resetMs, retryAfterMs
--   op: '0' limit, '1' peek, '2' refund; window in ms.
local function sliding_window(key, now, op, cost, limit, window)
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
  local stored = get(key)
  if stored then
    local storedIndex, storedPrevious, storedCurrent = string.match(stored, '^(%d+):(%d+):(%d+)$')
    storedIndex = tonumber(storedIndex)
    if storedIndex == index then
      previous, current = tonumber(storedPrevious), tonumber(storedCurrent)
      lasting = server_clock and current > 0
    elseif storedIndex == index - 1 then
      previous = tonumber(storedCurrent)
    end
  end
  local allowed = 1
  local retry = 0
  local write = false
  if op == '2' then
    current = current - cost
    if current < 0 then current = 0 end
    write = true
  else
    local estimate = previous * weight + current
    if estimate + cost > limit + EPSILON then
      -- A denied request consumes nothing. Find when the estimate leaves room for cost.
      allowed = 0
      if current + cost <= limit then
        retry = ceil((window - elapsed) - (limit - current - cost) * window / previous)
      else
        local into = window - (limit - cost) * window / current
        if into < 0 then into = 0 end
        retry = ceil((window - elapsed) + into)
      end
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
    if lasting and current > 0 then
      call('SET', key, string.format('%d:%d:%d', index, previous, current), 'KEEPTTL')
    elseif keepFor > 0 then
      call('SET', key, string.format('%d:%d:%d', index, previous, current), 'PX', int(keepFor))
    else
      call('DEL', key)
    end
  end
  local remaining = floor(limit - (previous * weight + current) + EPSILON)
  if remaining < 0 then remaining = 0 end
  return allowed, remaining, keepFor, retry
end
