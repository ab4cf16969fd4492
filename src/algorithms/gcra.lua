-- GCRA, also the token bucket: one number per identifier, the theoretical arrival time (TAT) in ms.
-- Twin of gcra.ts; the two change together.
-- KEYS: one key per identifier, each decided on its own, in order.
-- ARGV: op ('0' limit, '1' peek, '2' refund), now in ms ('' reads the server clock),
--       emission interval in ms, tolerance in ms (burst x interval), then one cost per key.
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
local interval = tonumber(ARGV[3])
local tolerance = tonumber(ARGV[4])
local eps = 1e-6
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local cost = tonumber(ARGV[4 + i])
  local tat = tonumber(call('GET', key)) or now
  if tat < now then tat = now end
  local allowed = 1
  local retry = 0
  local write = false
  if op == '2' then
    tat = tat - cost * interval
    if tat < now then tat = now end
    write = true
  else
    local next = tat + cost * interval
    if next - now > tolerance + eps then
      allowed = 0
      retry = ceil(next - tolerance - now)
    elseif op == '0' then
      tat = next
      write = true
    end
  end
  if write then
    if tat > now then
      call('SET', key, tat, 'PX', ceil(tat - now))
    else
      call('DEL', key)
    end
  end
  local n = #out
  out[n + 1] = allowed
  out[n + 2] = floor((tolerance - (tat - now)) / interval + eps)
  out[n + 3] = ceil(tat - now)
  out[n + 4] = retry
end
return out
