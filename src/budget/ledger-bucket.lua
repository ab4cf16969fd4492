--! script
-- The ledger of a token bucket budget: one hash per identifier. Per region, its leases (capacity beyond
-- its floor) as a staircase, largest first, each ending later than the one before: `l:<region>:<k>` the
-- level until `x:<region>:<k>`; and its demand: `d` units this period, `o` the period before, `i` the
-- period's index (periods of half a lease).
-- Twin of ledger-bucket.ts; the two change together. Composed after stores/redis/lua/prelude.lua.
-- KEYS: one ledger per identifier.
-- ARGV: now ('' reads the server clock), region, regions, lease (ms), pool, tau (ms), floor, the regions'
--       floor gaps in windows of half a lease ('s:out:back,...'), whether the caller holds its floor ('1' or '0');
--       then per key: the units asked of the region since it last said.
-- Returns per key: the region's lease, all regions' leases, and its demand in units per second.
local now = clock(ARGV[1])
local region, regions, lease_ms = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local pool, tau, base = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
-- A caller without its floor (back from a lapse and waiting, or not yet renewed) decides on its leases alone: its
-- want is not lessened by a floor it cannot use.
local own_base = base
if ARGV[9] == '0' then own_base = 0 end
local period_ms = lease_ms / 2
local period = floor(now / period_ms)
-- Floors of regions in their gap now (gaps in windows of half a lease, floorGapWindowMs) are lent: a
-- lapsed region admits on its floor at no time in its gap, and one back uses it only once every lease
-- granted from it has ended and its floor has had the time to fill since (see floor-lease.ts).
local at = floor(now / math.max(1, floor(lease_ms / 2)))
for s, o, b in string.gmatch(ARGV[8], '(%d+):(%-?%d+):(%-?%d+)') do
  o, b = tonumber(o), tonumber(b)
  if tonumber(s) < regions and o >= 0 and at >= o and at < b then pool = pool + base end
end
-- A lease's capacity goes with its share of the rate: enough for the demand seen, and a quarter more.
local HEADROOM = 1.25
-- The most leases kept per region; past it the two first are kept as one (the larger level, the later end).
local MAX_STEPS = 6
local fields, steps

local function value(name) return fields[name] or 0 end

local function rate_of(s)
  local at = value('i:' .. s)
  local previous, current = 0, 0
  if at == period then
    previous, current = value('o:' .. s), value('d:' .. s)
  elseif at == period - 1 then
    previous = value('d:' .. s)
  end
  return (previous * (1 - (now - period * period_ms) / period_ms) + current) / period_ms
end

local function write_steps(s, list)
  local k = 0
  while fields['l:' .. s .. ':' .. k] do
    fields['l:' .. s .. ':' .. k], fields['x:' .. s .. ':' .. k] = nil, nil
    k = k + 1
  end
  for j, step in ipairs(list) do
    fields['l:' .. s .. ':' .. (j - 1)], fields['x:' .. s .. ':' .. (j - 1)] = step[1], step[2]
  end
end

-- Drops expired leases and demand older than the last period.
local function load(key)
  fields, steps = {}, {}
  local flat = call('HGETALL', key)
  for i = 1, #flat, 2 do fields[flat[i]] = tonumber(flat[i + 1]) end
  for s = 0, regions - 1 do
    local list = {}
    local k = 0
    while fields['l:' .. s .. ':' .. k] do
      local expiry = value('x:' .. s .. ':' .. k)
      if expiry > now then list[#list + 1] = { fields['l:' .. s .. ':' .. k], expiry } end
      k = k + 1
    end
    steps[s] = list
    write_steps(s, list)
    if value('i:' .. s) < period - 1 then fields['d:' .. s], fields['o:' .. s], fields['i:' .. s] = nil, nil, nil end
  end
end

-- Adds the region's units to its demand of this period (the period before becomes its previous one).
local function record(units)
  local at = value('i:' .. region)
  if at == period then
    fields['d:' .. region] = value('d:' .. region) + units
    return
  end
  if at == period - 1 then fields['o:' .. region] = value('d:' .. region) else fields['o:' .. region] = 0 end
  fields['d:' .. region] = units
  fields['i:' .. region] = period
end

-- The region's leases with a new one, held until `expiry` (later than all): those it covers go.
local function with_lease(list, lease, expiry)
  local kept = {}
  for _, step in ipairs(list) do
    if step[1] > lease then kept[#kept + 1] = step end
  end
  if lease > 0 then kept[#kept + 1] = { lease, expiry } end
  while #kept > MAX_STEPS do
    local merged = { kept[1][1], kept[2][2] }
    table.remove(kept, 1)
    kept[1] = merged
  end
  return kept
end

local function reserved(s)
  local first = steps[s][1]
  if first then return first[1] end
  return 0
end

local function store(key)
  call('DEL', key)
  local args = {}
  for name, amount in pairs(fields) do
    args[#args + 1] = name
    args[#args + 1] = string.format('%.17g', amount)
  end
  if #args == 0 then return end
  call('HSET', key, unpack(args))
  call('PEXPIRE', key, int(3 * lease_ms))
end

local out = {}
for i = 1, #KEYS do
  load(KEYS[i])
  record(tonumber(ARGV[9 + i]))
  local rates, demand = {}, 0
  for s = 0, regions - 1 do
    rates[s] = rate_of(s)
    demand = demand + rates[s]
  end
  local function want(s)
    local held = base
    if s == region then held = own_base end
    return math.min(pool, math.max(0, ceil(rates[s] * tau * HEADROOM - held)))
  end
  local function fair(s)
    if demand > 0 then return pool * rates[s] / demand end
    return pool / regions
  end
  local free, owed = pool, 0
  for s = 0, regions - 1 do
    if s ~= region then
      free = free - reserved(s)
      owed = owed + math.max(0, math.min(fair(s), want(s)) - reserved(s))
    end
  end
  local lease = floor(math.min(want(region), math.max(math.min(fair(region), free), free - owed)))
  if lease < 0 then lease = 0 end
  steps[region] = with_lease(steps[region], lease, now + lease_ms)
  write_steps(region, steps[region])
  local leased = 0
  for s = 0, regions - 1 do leased = leased + reserved(s) end
  store(KEYS[i])
  out[#out + 1] = lease
  out[#out + 1] = leased
  out[#out + 1] = ceil(rates[region] * 1000)
end
return out
