-- Sliding window counter: the previous and current clock-aligned windows, weighted by overlap.
-- One value per identifier, "<current window index>:<previous count>:<current count>".
-- Twin of sliding-window.ts; the two change together.
-- KEYS: one key per identifier, each decided on its own, in order.
-- ARGV: op ('0' limit, '1' peek, '2' refund), now in ms ('' reads the server clock),
--       limit, window in ms, then one cost per key.
-- Returns allowed, remaining, resetMs, retryAfterMs for each key.
local call = redis.call
local floor, ceil = math.floor, math.ceil
local op = ARGV[1]
local now = tonumber(ARGV[2])
if not now then
  -- TIME inside the script: app servers disagree about the clock.
  local t = call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local eps = 1e-6
local index = floor(now / window)
local elapsed = now - index * window
-- Share of the previous window that still overlaps the sliding window ending now.
local weight = (window - elapsed) / window
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local cost = tonumber(ARGV[4 + i])
  local previous, current = 0, 0
  local stored = call('GET', key)
  if stored then
    local storedIndex, storedPrevious, storedCurrent = string.match(stored, '^(%d+):(%d+):(%d+)$')
    storedIndex = tonumber(storedIndex)
    if storedIndex == index then
      previous, current = tonumber(storedPrevious), tonumber(storedCurrent)
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
    if estimate + cost > limit + eps then
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
  if current > 0 then keepFor = ceil(2 * window - elapsed) elseif previous > 0 then keepFor = ceil(window - elapsed) end
  if write then
    if keepFor > 0 then
      call('SET', key, string.format('%d:%d:%d', index, previous, current), 'PX', keepFor)
    else
      call('DEL', key)
    end
  end
  local remaining = floor(limit - (previous * weight + current) + eps)
  if remaining < 0 then remaining = 0 end
  local n = #out
  out[n + 1] = allowed
  out[n + 2] = remaining
  out[n + 3] = keepFor
  out[n + 4] = retry
end
return out
