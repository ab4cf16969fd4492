--! combined-body
-- Body of the combined script (`all`), after prelude.lua, every algorithm file, stored.lua and the
-- line `local ALGORITHMS = { [<file name>] = <its function>, ... }`: several policies, one key each
-- (keys sharing a hash tag), granted together or not at all. Each algorithm's function keeps the
-- contract written at the top of single.lua.
-- KEYS: one key per policy.
-- ARGV: op ('0' limit, '1' peek), now in ms ('' reads the server clock), operands per key (k),
--       then per key: algorithm name, cost, first parameter, second parameter, k operands ('' when
--       the key's policy takes fewer: only a concurrency policy's acquisition takes one, its lease id),
--       and when `stored`, what to read (stored.lua) and the policy's limit rule (rule, own limit,
--       share, x, y, follows); last, `stored`: '1' when entries stored beside the keys are read.
-- Returns, for each key: allowed, remaining, resetMs, retryAfterMs, when `stored` the stored limit
-- applied (0, or -1 for a denial), the number of fields, the fields: the grant when every key
-- allows, otherwise what each would say (a look, which has no fields), with nothing taken from any.
local op = ARGV[1]
local now = clock(ARGV[2])
local operands = tonumber(ARGV[3])
local stored = ARGV[#ARGV] == '1'
local stride = 4 + operands + (stored and 7 or 0)
-- What is stored for every key, both kinds, read once for both passes (stored.lua); each key's own
-- reads then say which it uses.
local entries
if stored then entries = stored_entries(KEYS, 3) end
local function each(mode)
  local out, everyone = {}, 1
  for i = 1, #KEYS do
    local at = 3 + (i - 1) * stride
    local decide = ALGORITHMS[ARGV[at + 1]]
    local cost, first, second = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
    local a, b = nil, nil
    if operands > 0 then a = ARGV[at + 5] end
    if operands > 1 then b = ARGV[at + 6] end
    -- Fields: a lease's acquisition's three (its token, expiry, slots reclaimed: concurrency.lua),
    -- the only ones a combined call asks for.
    local fields = (mode == '0' and decide == concurrency) and 3 or 0
    local allowed, remaining, reset, retry, field1, field2, field3, applied
    if stored then
      local s = at + 4 + operands
      allowed, remaining, reset, retry, field1, field2, field3, applied = decide_stored(decide, KEYS[i], now,
        mode, cost, first, second, a, tonumber(ARGV[s + 1]), entries[2 * i - 1], entries[2 * i], ARGV[s + 2],
        tonumber(ARGV[s + 3]), tonumber(ARGV[s + 4]), tonumber(ARGV[s + 5]), tonumber(ARGV[s + 6]),
        ARGV[s + 7] == '1', b)
    else
      allowed, remaining, reset, retry, field1, field2, field3 = decide(KEYS[i], now, mode, cost, first, second,
        a, b)
    end
    if allowed == 0 then everyone = 0 end
    local n = #out
    out[n + 1] = allowed
    out[n + 2] = remaining
    out[n + 3] = reset
    out[n + 4] = retry
    local m = n + 4
    if stored then
      m = m + 1
      out[m] = applied
    end
    out[m + 1] = fields
    if fields > 0 then
      out[m + 2] = field1 or 0
      out[m + 3] = field2 or 0
      out[m + 4] = field3 or 0
    end
  end
  return out, everyone
end
-- Look first, take only when every policy allows: a denial consumes nothing anywhere.
local looked, everyone = each('1')
if op == '1' or everyone == 0 then return looked end
return (each('0'))
