--! decision-body
-- Body of every decision script: one policy, a batch of keys, each decided on its own, in order.
--
-- A decision script is, joined with newlines (scripts/gen-scripts.mjs builds the layout from each
-- file's first line): prelude.lua, one algorithm file, stored.lua, the line
-- `local decide, read_ahead, functions = <the file's function>, <whether its decisions start with a
-- GET>, <nil, or the file's other decision functions by name>`, and this file.
--
-- THE CONTRACT OF AN ALGORITHM'S FUNCTION with the scripts around it (single.lua, all.lua, stored.lua):
--   decide(key, now, op, cost, first, second, operand1, operand2)
--     -> allowed, remaining, resetMs, retryAfterMs[, field1[, field2[, field3]]]
--   Inputs. key: the identifier's state key (KEYS[i]); the only key it may read or write (the
--     entries stored.lua reads beside it share its hash slot and are read before it is called).
--     now: ms, a float; the caller's clock when the call brings one (tests replay timelines), else
--     the server's TIME, read once per call by clock() in prelude.lua, which then sets server_clock.
--     A function never reads TIME itself: every key of a batch is decided at the same `now`.
--     op: the operation's code as text (the code of its module in src/operations/: '0' limit, '1' peek,
--     '2' refund, '3' charge, '4' schedule, '5' release, '6' extend, ...). A function raises error() for an op it
--     does not take (the store only sends what the policy takes). cost: a whole number (units,
--     or a budget write's amount).
--     first, second: the policy's two parameters as numbers (a window's limit and ms; GCRA's
--     interval and tolerance; ...), or those a stored limit gives (stored.lua's limit_params).
--     operand1, operand2: the operation's operands: numbers, except a lease's (op '0' of a
--     concurrency policy, '5', '6'), which stay text; nil when the operation has none.
--   Returns whole numbers (Redis truncates a Lua number in a reply): allowed 1 or 0; remaining
--     units >= 0; resetMs, when the state is back to empty (0 when nothing is held); retryAfterMs,
--     0 when allowed (a charge's, always allowed, is the wait for a cost of 1); then the operation's
--     fields (`fields` of its shape: a charge's debt and units cut off, a schedule's wait, pause and shift, a
--     lease's token, expiry and slots reclaimed), none for limit, peek and refund.
--   Duties. A denial and a peek take nothing and write nothing that changes a later decision.
--     Every write sets the key's expiry in the same call (set_for in prelude.lua), no later than when its state stops
--     mattering to a decision (each file says when: a window's end, the TAT, a lease length past
--     the last slot), so Redis removes idle identifiers; on the server's clock (server_clock) a key
--     whose expiry is already right may keep it (SET ... KEEPTTL, INCRBY). One rounding: on the
--     server's clock gcra.lua expires a key at the whole second after its TAT, less than a second
--     after its state stops mattering, so that decisions within that second keep the expiry (a TAT
--     in the past decides as now, so the second changes no decision). A function whose file says
--     `reads-ahead` reads its key first, through get() (prelude.lua): in a batch the keys were
--     read with one MGET. Functions are `local`, named after their file (`-` becomes `_`), and
--     their helpers are prefixed the same way: every algorithm shares one chunk in all.lua.
--
-- KEYS: one state key per identifier.
-- ARGV: op (with its shape: see below), now in ms ('' reads the server clock), the policy's two parameters, one cost per key
--       (or, when every key's cost is the same, that cost once, after a '*': one argument for the batch),
--       then each key's operands (`operands` each: a refund's settle id; a charge's max_debt and
--       settle id (a reservation's settle is applied once: see the marker below); a schedule's max_wait and
--       pause_ms; a lease's id, and an extension's ms and token; a concurrency policy's
--       acquisition, a limit, carries its new lease's id); when entries are read, the policy's limit
--       rule (rule, own limit, share, x, y, follows: stored.lua); then what to read of the entries
--       stored beside each key (`reads`: 0 nothing, 1 the denial, 2 the limit, 3 both); last, for
--       a decision function other than the file's own, its name (`functions`).
-- Returns, first, -1 - the reset shared by the batch (the first allowed key's resetMs, else
-- 0; negative: the records below are packed), then one record per key, in order:
--   r >= 0              allowed; remaining r, resetMs the shared one, retryAfterMs 0
--   -1 - 2 x (reset x 2^20 + r)  allowed; remaining r (< 2^20), resetMs reset (< 2^32), retryAfterMs 0
--   'reset r'           the same, as text, when r or reset is too large to pack (rare)
--   -2 - 2 x reset, r, t  denied; remaining r, resetMs reset, retryAfterMs t
-- Every allowed record is one value (a window policy's keys share their reset; GCRA's each have
-- their own, packed with the remaining units): Redis builds a quarter of the reply, and the client
-- decodes a quarter of the integers. (A first value >= 0 announces the unpacked form, where an
-- allowed key's own reset is -1 - 2 x reset followed by r: the decoder still reads it.)
-- An operation with fields (`fields` of its shape) follows each record with that many integers. A charge's
-- record (always allowed) is followed by the retryAfterMs for a cost of 1, the debt, and the units
-- cut off; a lease's acquisition's by its token, expiry and the slots it reclaimed.
-- Last, when entries are read, one more integer per record (after the operation's fields): the
-- stored limit applied, 0, or -1 for a denial (stored.lua).
-- The operation and its shape, '<code>:<operands>:<fields>' (RecordShape.wire, made by each operation's
-- module in src/operations/): a new operation needs no table here. A bare code has neither.
local op, operands, fields = string.match(ARGV[1], '^(%d+):?(%d*):?(%d*)$')
if not op then return redis.error_reply('ERR sluice: an operation is <code>:<operands>:<fields>') end
operands, fields = tonumber(operands) or 0, tonumber(fields) or 0
-- One script per algorithm file: a call of another of its functions names it last.
local last = #ARGV
if functions and functions[ARGV[last]] then
  decide = functions[ARGV[last]]
  last = last - 1
end
-- Whether entries stored beside the keys are read: an argument, not a second script, so that the
-- server holds one script per algorithm file.
local reads = tonumber(ARGV[last])
local stored = reads ~= 0
-- A lease's operands stay text (its id; an extension's ms, '' for the policy's): concurrency.lua
-- reads them. Every other operation's are numbers.
local numeric = op ~= '0' and op ~= '5' and op ~= '6'
local now = clock(ARGV[2])
-- Policies that start each decision with a GET (read_ahead: `reads-ahead` on their file's first line) read the keys of a batch
-- with one MGET instead: one command for the batch rather than one per key.
-- The keys MGET found empty are checked with one EXISTS: when none exists (in any type), their
-- decisions skip the GET that would tell a missing key from one of another type.
if read_ahead and #KEYS > 1 then
  local values = call('MGET', unpack(KEYS))
  ahead = {}
  local empty = {}
  for i = 1, #KEYS do
    local value = values[i]
    ahead[KEYS[i]] = value
    if not value then empty[#empty + 1] = KEYS[i] end
  end
  if #empty > 0 and call('EXISTS', unpack(empty)) == 0 then
    for i = 1, #empty do ahead[empty[i]] = ABSENT end
  end
end
local first, second = tonumber(ARGV[3]), tonumber(ARGV[4])
local rule, own, share, x, y, follows, entries
if stored then
  local at = last - 6
  rule, own = ARGV[at], tonumber(ARGV[at + 1])
  share, x, y = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  follows = ARGV[at + 5] == '1'
  entries = stored_entries(KEYS, reads)
end
local out = { 0 }
local shared = nil
local n = 1
-- An allowed record with a reset of its own: one integer when both fit (the client splits it), else
-- one string; either way one value. Both are whole numbers as Redis would make them (it truncates a
-- Lua number in a reply; a stored limit's scaling can leave a fraction).
local PACK = 1048576
local function allowed_own(reset, remaining)
  reset, remaining = floor(reset), floor(remaining)
  if remaining < PACK and reset < 4294967296 then return -1 - 2 * (reset * PACK + remaining) end
  return string.format('%d %d', reset, remaining)
end
-- Costs are mostly all alike: a batch whose keys all cost the same sends its cost once ('*<cost>'),
-- and each key's operands follow it; otherwise the text of the last cost is compared (interned
-- strings: one pointer) before it is parsed again.
local uniform = string.byte(ARGV[5]) == 42
local base = uniform and 5 or 4 + #KEYS
local costText, cost = nil, nil
if uniform then cost = tonumber(string.sub(ARGV[5], 2)) end
local charging = op == '3'
-- A refund's and a charge's last operand: the settle they belong to ('0' for none). A settle's
-- marker beside the state (its key with '%settled:<id>' appended: the same hash tag and slot) says
-- it was applied; it lasts until the state's reset, and the same settle sent again changes nothing.
local settles = op == '2' or op == '3'
for i = 1, #KEYS do
  if not uniform then
    local text = ARGV[4 + i]
    if text ~= costText then
      costText = text
      cost = tonumber(text)
    end
  end
  local operand1, operand2 = nil, nil
  if operands > 0 then
    local at = base + (i - 1) * operands
    operand1 = ARGV[at + 1]
    if operands > 1 then operand2 = ARGV[at + 2] end
    if numeric then operand1, operand2 = tonumber(operand1), tonumber(operand2) end
  end
  local allowed, remaining, reset, retry, field1, field2, field3, applied
  local marker = nil
  if settles then
    local id = ARGV[base + i * operands]
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
    n = n + 1
    out[n] = allowed_own(reset, remaining)
    field1, field2, field3 = retry, field1, field2
  elseif allowed == 1 then
    -- An allowed request waits for nothing: the records have no room for a retry.
    if retry ~= 0 then return redis.error_reply('ERR sluice: allowed with a retryAfterMs') end
    if shared == nil then shared = reset end
    n = n + 1
    if reset == shared then out[n] = remaining else out[n] = allowed_own(reset, remaining) end
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
out[1] = -1 - floor(shared or 0)
return out
