-- Fixed window: windows aligned to the clock; one value per identifier, "<window index>:<count>".
-- Twin of fixed-window.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- fixed_window(key, now, op, cost, limit, window) -> allowed, remaining, resetMs, retryAfterMs
--   op: '0' limit, '1' peek, '2' refund; window in ms.
local function fixed_window_store(key, index, count, fresh, untilEnd)
  if fresh then
    call('SET', key, string.format('%d:%d', index, count), 'KEEPTTL')
  else
    call('SET', key, string.format('%d:%d', index, count), 'PX', untilEnd)
  end
end

local function fixed_window(key, now, op, cost, limit, window)
  local index = floor(now / window)
  -- The key lives until its window ends, never longer.
  local untilEnd = ceil((index + 1) * window - now)
  local count = 0
  -- On the server's clock, a key that already holds this window keeps its expiry, which is already
  -- the window's end: SET ... KEEPTTL costs Redis much less than SET ... PX, which removes and
  -- re-adds the expiry. (server_clock: see prelude.lua.)
  local fresh = false
  local stored = call('GET', key)
  if stored then
    local storedIndex, storedCount = string.match(stored, '^(%d+):(%d+)$')
    -- A count from an earlier window is stale: the window starts empty.
    if tonumber(storedIndex) == index then
      count = tonumber(storedCount)
      fresh = server_clock
    end
  end
  local allowed = 1
  local retry = 0
  if op == '2' then
    count = count - cost
    if count < 0 then count = 0 end
    if count > 0 then
      fixed_window_store(key, index, count, fresh, untilEnd)
    else
      call('DEL', key)
    end
  elseif count + cost > limit then
    -- A denied request consumes nothing.
    allowed = 0
    retry = untilEnd
  elseif op == '0' then
    count = count + cost
    fixed_window_store(key, index, count, fresh, untilEnd)
  end
  local reset = 0
  if count > 0 then reset = untilEnd end
  return allowed, limit - count, reset, retry
end
