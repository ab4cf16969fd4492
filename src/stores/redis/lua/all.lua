-- Body of the combined script, after prelude.lua and every algorithm's function: several policies,
-- one key each (keys sharing a hash tag), granted together or not at all.
-- KEYS: one key per policy.
-- ARGV: op ('0' limit, '1' peek), now in ms ('' reads the server clock),
--       then per key: algorithm name, cost, first parameter, second parameter.
-- Returns allowed, remaining, resetMs, retryAfterMs for each key: the grant when every key allows,
-- otherwise what each would say, with nothing taken from any.
local ALGORITHMS = { ['fixed-window'] = fixed_window, ['sliding-window'] = sliding_window,
  ['sliding-log'] = sliding_log, gcra = gcra, ['budget-window'] = budget_window,
  ['budget-bucket'] = budget_bucket }
local op = ARGV[1]
local now = clock(ARGV[2])
local function each(mode)
  local out, everyone = {}, 1
  for i = 1, #KEYS do
    local at = 2 + (i - 1) * 4
    local decide = ALGORITHMS[ARGV[at + 1]]
    local allowed, remaining, reset, retry =
      decide(KEYS[i], now, mode, tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]))
    if allowed == 0 then everyone = 0 end
    local n = #out
    out[n + 1] = allowed
    out[n + 2] = remaining
    out[n + 3] = reset
    out[n + 4] = retry
  end
  return out, everyone
end
-- Look first, take only when every policy allows: a denial consumes nothing anywhere.
local looked, everyone = each('1')
if op == '1' or everyone == 0 then return looked end
return (each('0'))
