-- Body of the one-policy script, after prelude.lua, the algorithm's function, `local decide = <it>`,
-- `local read_ahead = <whether it starts with a GET>` and `local stored = <whether it reads what
-- operators stored>` (with stored.lua before it when true).
-- KEYS: one key per identifier, each decided on its own, in order.
-- ARGV: op (see src/operations.ts), now in ms ('' reads the server clock), the policy's two
--       parameters, one cost per key, then each key's operands (OPERANDS[op] each: a refund's settle
--       id; a charge's max_debt and settle id; a schedule's max_wait and pause_ms; a lease's id, and an extension's ms and token; a
--       concurrency policy's acquisition, a limit, carries its new lease's id); when `stored`, last:
--       what to read (stored.lua) and the policy's limit rule (rule, own limit, share, x, y, follows).
-- Returns integers: first the reset shared by the batch (the first allowed key's resetMs, else 0),
-- then one record per key, in order:
--   r >= 0              allowed; remaining r, resetMs the shared one, retryAfterMs 0
--   -1 - 2 x reset, r   allowed; remaining r, resetMs reset, retryAfterMs 0
--   -2 - 2 x reset, r, t  denied; remaining r, resetMs reset, retryAfterMs t
-- Most records are one integer (every allowed key of a window policy ends its state at the same
-- moment): Redis builds a quarter of the reply, and the client decodes a quarter of the integers.
-- An operation with fields (FIELDS[op]) follows each record with that many integers. A charge's
-- record (always allowed) is followed by the retryAfterMs for a cost of 1, the debt, and the units
-- cut off; a lease's acquisition's by its token, expiry and the slots it reclaimed.
-- Last, when `stored`, one more integer per record (after the operation's fields): the stored limit
-- applied, 0, or -1 for a denial (stored.lua).
local op = ARGV[1]
-- Each operation's `operands` and `fields` (its entry in src/operations.ts); 0 when absent.
local OPERANDS = { ['2'] = 1, ['3'] = 2, ['4'] = 2, ['5'] = 1, ['6'] = 3 }
local FIELDS = { ['3'] = 3, ['4'] = 3, ['5'] = 2, ['6'] = 3 }
local operands, fields = OPERANDS[op] or 0, FIELDS[op] or 0
-- A limit that carries an operand is a concurrency policy's acquisition (shapeOf in
-- src/operations.ts): its lease's id in, its token, expiry and slots reclaimed out.
if op == '0' and #ARGV > 4 + #KEYS + (stored and 7 or 0) then operands, fields = 1, 3 end
-- A lease's operands stay text (its id; an extension's ms, '' for the policy's): concurrency.lua
-- reads them. Every other operation's are numbers.
local numeric = op ~= '0' and op ~= '5' and op ~= '6'
local now = clock(ARGV[2])
-- Policies that start each decision with a GET (read_ahead: see scripts.ts) read the keys of a batch
-- with one MGET instead: one command for the batch rather than one per key.
if read_ahead and #KEYS > 1 then
  local values = call('MGET', unpack(KEYS))
  ahead = {}
  for i = 1, #KEYS do ahead[KEYS[i]] = values[i] end
end
local first, second = tonumber(ARGV[3]), tonumber(ARGV[4])
local reads, rule, own, share, x, y, follows, entries
if stored then
  local at = #ARGV - 6
  reads, rule, own = tonumber(ARGV[at]), ARGV[at + 1], tonumber(ARGV[at + 2])
  share, x, y = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5])
  follows = ARGV[at + 6] == '1'
  entries = stored_entries(KEYS, reads)
end
local out = { 0 }
local shared = nil
local n = 1
-- Costs are mostly all alike: the text of the last one is compared (interned strings: one pointer)
-- before it is parsed again.
local costText, cost = nil, nil
local charging = op == '3'
-- A refund's and a charge's last operand: the settle they belong to ('0' for none). A settle's
-- marker beside the state (its key with '%settled:<id>' appended: the same hash tag and slot) says
-- it was applied; it lasts until the state's reset, and the same settle sent again changes nothing.
local settles = op == '2' or op == '3'
for i = 1, #KEYS do
  local text = ARGV[4 + i]
  if text ~= costText then
    costText = text
    cost = tonumber(text)
  end
  local operand1, operand2 = nil, nil
  if operands > 0 then
    local at = 4 + #KEYS + (i - 1) * operands
    operand1 = ARGV[at + 1]
    if operands > 1 then operand2 = ARGV[at + 2] end
    if numeric then operand1, operand2 = tonumber(operand1), tonumber(operand2) end
  end
  local allowed, remaining, reset, retry, field1, field2, field3, applied
  local marker = nil
  if settles then
    local id = ARGV[4 + #KEYS + i * operands]
    if id ~= '0' then marker = KEYS[i] .. '%settled:' .. id end
  end
  local seen = marker ~= nil and call('EXISTS', marker) == 1
  if seen then
    -- Applied before: what the quota is now, as a look at one unit says.
    allowed, remaining, reset, retry = decide(KEYS[i], now, '1', 1, first, second)
    applied = 0
  elseif stored then
    local denial, limit = stored_at(entries, i, reads)
    allowed, remaining, reset, retry, field1, field2, field3, applied = decide_stored(decide, KEYS[i], now,
      op, cost, first, second, operand1, reads, denial, limit, rule, own, share, x, y, follows, operand2)
  else
    allowed, remaining, reset, retry, field1, field2, field3 =
      decide(KEYS[i], now, op, cost, first, second, operand1, operand2)
  end
  if marker and not seen then
    call('SET', marker, '1', 'PX', math.max(1, ceil(reset)))
  end
  if charging then
    -- Its wait is its first field: an allowed record has no room for one.
    out[n + 1] = -1 - 2 * reset
    out[n + 2] = remaining
    n = n + 2
    field1, field2, field3 = retry, field1, field2
  elseif allowed == 1 then
    -- An allowed request waits for nothing: the records have no room for a retry.
    if retry ~= 0 then return redis.error_reply('ERR sluice: allowed with a retryAfterMs') end
    if shared == nil then
      shared = reset
      out[1] = reset
    end
    if reset == shared then
      n = n + 1
      out[n] = remaining
    else
      out[n + 1] = -1 - 2 * reset
      out[n + 2] = remaining
      n = n + 2
    end
  else
    out[n + 1] = -2 - 2 * reset
    out[n + 2] = remaining
    out[n + 3] = retry
    n = n + 3
  end
  if fields > 0 then
    -- A key a stored denial refused has none: zeros keep the records' shape.
    out[n + 1] = field1 or 0
    if fields > 1 then out[n + 2] = field2 or 0 end
    if fields > 2 then out[n + 3] = field3 or 0 end
    n = n + fields
  end
  if stored then
    n = n + 1
    out[n] = applied
  end
end
return out
