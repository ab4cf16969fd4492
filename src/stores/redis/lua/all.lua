-- Body of the combined script, after prelude.lua and every algorithm's function: several policies,
-- one key each (keys sharing a hash tag), granted together or not at all.
-- KEYS: one key per policy.
-- ARGV: op ('0' limit, '1' peek), now in ms ('' reads the server clock), operands per key (k),
--       then per key: algorithm name, cost, first parameter, second parameter, k operands ('' when
--       the key's policy takes fewer: only a concurrency policy's acquisition takes one, its lease id).
-- Returns, for each key: allowed, remaining, resetMs, retryAfterMs, the number of fields, the
-- fields: the grant when every key allows, otherwise what each would say (a look, which has no
-- fields), with nothing taken from any.
local ALGORITHMS = { ['fixed-window'] = fixed_window, ['sliding-window'] = sliding_window,
  ['sliding-log'] = sliding_log, gcra = gcra, concurrency = concurrency }
local op = ARGV[1]
local now = clock(ARGV[2])
local operands = tonumber(ARGV[3])
local stride = 4 + operands
local function each(mode)
  local out, everyone = {}, 1
  for i = 1, #KEYS do
    local at = 3 + (i - 1) * stride
    local decide = ALGORITHMS[ARGV[at + 1]]
    local a, b = nil, nil
    if operands > 0 then a = ARGV[at + 5] end
    if operands > 1 then b = ARGV[at + 6] end
    local allowed, remaining, reset, retry, fields =
      decide(KEYS[i], now, mode, tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]), a, b)
    if allowed == 0 then everyone = 0 end
    local n = #out
    out[n + 1] = allowed
    out[n + 2] = remaining
    out[n + 3] = reset
    out[n + 4] = retry
    if fields then
      out[n + 5] = #fields
      for j = 1, #fields do out[n + 5 + j] = fields[j] end
    else
      out[n + 5] = 0
    end
  end
  return out, everyone
end
-- Look first, take only when every policy allows: a denial consumes nothing anywhere.
local looked, everyone = each('1')
if op == '1' or everyone == 0 then return looked end
return (each('0'))
