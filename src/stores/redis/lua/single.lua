-- Body of the one-policy script, after prelude.lua, the algorithm's function, and `local decide = <it>`.
-- KEYS: one key per identifier, each decided on its own, in order.
-- ARGV: op ('0' limit, '1' peek, '2' refund), now in ms ('' reads the server clock),
--       the policy's two parameters, then one cost per key.
-- Returns allowed, remaining, resetMs, retryAfterMs for each key.
local op = ARGV[1]
local now = clock(ARGV[2])
local first, second = tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {}
for i = 1, #KEYS do
  local allowed, remaining, reset, retry = decide(KEYS[i], now, op, tonumber(ARGV[4 + i]), first, second)
  local n = #out
  out[n + 1] = allowed
  out[n + 2] = remaining
  out[n + 3] = reset
  out[n + 4] = retry
end
return out
