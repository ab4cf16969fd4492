--! script
-- The region leases of a window budget: one hash per budget, `u:<region>` when the region's lease ends
-- (ms, this store's clock), and for a region that came back from a lapse `o:<region>`, `b:<region>`,
-- the windows [o, b) in which its floor is out of the ledger's sums.
-- Twin of ledger-regions.ts; the two change together. Composed after stores/redis/lua/prelude.lua.
-- KEYS: the budget's lease hash.
-- ARGV: now ('' reads the server clock), region, regions, lease (ms), window (ms).
-- Renews the region's lease; returns now, then per region its gap: out, back (-1, -1 for none).
local now = clock(ARGV[1])
local region, regions = tonumber(ARGV[2]), tonumber(ARGV[3])
local lease, window = tonumber(ARGV[4]), tonumber(ARGV[5])
local key = KEYS[1]

local fields = {}
local flat = call('HGETALL', key)
for i = 1, #flat, 2 do fields[flat[i]] = tonumber(flat[i + 1]) end

-- A lapsed region admits on its floor in no window starting at or after its lease's end, until it
-- comes back, and one that comes back waits for the window after next; one that came back keeps its gap.
local function gap(s)
  local untilMs = fields['u:' .. s]
  if untilMs and now >= untilMs then return ceil(untilMs / window), floor(now / window) + 2 end
  local out, back = fields['o:' .. s], fields['b:' .. s]
  if out and back then return out, back end
  return -1, -1
end

local mine = fields['u:' .. region]
if mine and now >= mine then
  local out, back = gap(region)
  fields['o:' .. region] = out
  fields['b:' .. region] = back
  call('HSET', key, 'o:' .. region, string.format('%d', out), 'b:' .. region, string.format('%d', back))
end
fields['u:' .. region] = ceil(now + lease)
call('HSET', key, 'u:' .. region, string.format('%d', fields['u:' .. region]))
call('PEXPIRE', key, int(3 * math.max(lease, window)))

local out = { int(floor(now)) }
for s = 0, regions - 1 do
  local o, b = gap(s)
  out[#out + 1] = o
  out[#out + 1] = b
end
return out
