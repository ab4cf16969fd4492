-- Fixed window: windows aligned to the clock; one value per identifier, "<window index>:<count>".
-- Twin of fixed-window.ts; the two change together.
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
local index = floor(now / window)
-- The key lives until its window ends, never longer.
local untilEnd = ceil((index + 1) * window - now)
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local cost = tonumber(ARGV[4 + i])
  local count = 0
  local stored = call('GET', key)
  if stored then
    local storedIndex, storedCount = string.match(stored, '^(%d+):(%d+)$')
    -- A count from an earlier window is stale: the window starts empty.
    if tonumber(storedIndex) == index then count = tonumber(storedCount) end
  end
  local allowed = 1
  local retry = 0
  if op == '2' then
    count = count - cost
    if count < 0 then count = 0 end
    if count > 0 then
      call('SET', key, string.format('%d:%d', index, count), 'PX', untilEnd)
    else
      call('DEL', key)
    end
  elseif count + cost > limit then
    -- A denied request consumes nothing.
    allowed = 0
    retry = untilEnd
  elseif op == '0' then
    count = count + cost
    call('SET', key, string.format('%d:%d', index, count), 'PX', untilEnd)
  end
  local n = #out
  out[n + 1] = allowed
  out[n + 2] = limit - count
  if count > 0 then out[n + 3] = untilEnd else out[n + 3] = 0 end
  out[n + 4] = retry
end
return out
