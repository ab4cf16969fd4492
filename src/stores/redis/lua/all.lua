-- Body of the combined script, after prelude.lua, every algorithm's function and `local stored =
-- <whether it reads what operators stored>` (with stored.lua before it when true): several policies,
-- one key each (keys sharing a hash tag), granted together or not at all.
-- KEYS: one key per policy.
-- ARGV: op ('0' limit, '1' peek), now in ms ('' reads the server clock),
--       then per key: algorithm name, cost, first parameter, second parameter, and when `stored`,
--       what to read (stored.lua) and the policy's limit rule (rule, own limit, share, x, y, follows).
-- Returns allowed, remaining, resetMs, retryAfterMs for each key (and when `stored`, the stored limit
-- applied, 0, or -1 for a denial): the grant when every key allows, otherwise what each would say,
-- with nothing taken from any.
local ALGORITHMS = { ['fixed-window'] = fixed_window, ['sliding-window'] = sliding_window,
  ['sliding-log'] = sliding_log, gcra = gcra, ['budget-window'] = budget_window,
  ['budget-bucket'] = budget_bucket }
local op = ARGV[1]
local now = clock(ARGV[2])
local stride = stored and 11 or 4
-- What is stored for every key, both kinds, read once for both passes (stored.lua); each key's own
-- reads then say which it uses.
local entries
if stored then entries = stored_entries(KEYS, 3) end
local function each(mode)
  local out, everyone = {}, 1
  for i = 1, #KEYS do
    local at = 2 + (i - 1) * stride
    local decide = ALGORITHMS[ARGV[at + 1]]
    local cost, first, second = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
    -- `_`: an operation's fields (a charge's, a schedule's), which no combined call asks for.
    local allowed, remaining, reset, retry, applied, _
    if stored then
      allowed, remaining, reset, retry, _, _, _, applied = decide_stored(decide, KEYS[i], now, mode, cost,
        first, second, nil, tonumber(ARGV[at + 5]), entries[2 * i - 1], entries[2 * i], ARGV[at + 6],
        tonumber(ARGV[at + 7]), tonumber(ARGV[at + 8]), tonumber(ARGV[at + 9]), tonumber(ARGV[at + 10]),
        ARGV[at + 11] == '1')
    else
      allowed, remaining, reset, retry = decide(KEYS[i], now, mode, cost, first, second)
    end
    if allowed == 0 then everyone = 0 end
    local n = #out
    out[n + 1] = allowed
    out[n + 2] = remaining
    out[n + 3] = reset
    out[n + 4] = retry
    if stored then out[n + 5] = applied end
  end
  return out, everyone
end
-- Look first, take only when every policy allows: a denial consumes nothing anywhere.
local looked, everyone = each('1')
if op == '1' or everyone == 0 then return looked end
return (each('0'))
