--! script
-- The ledger of a window budget (fixed or sliding): one hash per identifier, `g:<window>:<region>` units
-- granted to a region beyond its floor and `d:<window>:<region>` units it reported asked of it.
-- Twin of ledger-windows.ts; the two change together. Composed after stores/redis/lua/prelude.lua.
-- KEYS: one ledger per identifier.
-- ARGV: now ('' reads the server clock), region, regions, window (ms), limit, floor, reserve
--       (thousandths), sliding ('1' or '0'), the asker's window index, the regions' floor gaps
--       ('s:out:back,...': windows [out, back) in which region s admits nothing on its floor, left out
--       of the sums; see ledger-regions.lua); then per key: demand, want,
--       claim, release, before (a sliding window: what the region admitted in the window before, -1
--       when not known; that window's grant is lowered to it).
-- Returns per key: the region's grant for its window and for the next (floor included), all regions'
-- grants for its window, and what this call granted the region for its window.
local now = clock(ARGV[1])
local region, regions, window = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local limit, base, reserve = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local sliding, index = ARGV[8] == '1', tonumber(ARGV[9])
local current = floor(now / window)
local fields

-- Each region's floor gap, as the asker last read it: its floor is out of the sums there.
local gapOut, gapBack = {}, {}
for s, o, b in string.gmatch(ARGV[10], '(%d+):(%-?%d+):(%-?%d+)') do
  gapOut[tonumber(s)] = tonumber(o)
  gapBack[tonumber(s)] = tonumber(b)
end

-- A region's floor in a window, as the sums count it: none in its gap.
local function floorOf(at, s)
  local o = gapOut[s]
  if o and o >= 0 and at >= o and at < gapBack[s] then return 0 end
  return base
end

local function floors(at)
  local total = 0
  for s = 0, regions - 1 do total = total + floorOf(at, s) end
  return total
end

local function value(name) return fields[name] or 0 end

local function sum(kind, at)
  local total = 0
  for s = 0, regions - 1 do total = total + value(kind .. ':' .. at .. ':' .. s) end
  return total
end

local function total(at) return floors(at) + sum('g', at) end

-- A region's grant for a window, floor included (as the sums count it).
local function grant(at, s) return floorOf(at, s) + value('g:' .. at .. ':' .. s) end

-- Units region `region` may be granted for window `at`. A fixed window: what the window's floors and
-- grants leave of the limit. A sliding one: each region keeps its own estimate within its grant, so
-- what regions together may admit at a time is the sum over regions of the larger of the grant and
-- the previous window's grant weighted as the estimate weighs it; both sums below stay within the
-- limit (see docs/regions.md for the proof): over this window and the previous one at this time,
-- and over this window and the next one (which weighs this one whole at its start).
local function available(at)
  if not sliding then return limit - total(at) end
  local elapsed = (now - at * window) / window
  if elapsed < 0 then elapsed = 0 elseif elapsed > 1 then elapsed = 1 end
  local weight = 1 - elapsed
  local before, after = 0, 0
  for s = 0, regions - 1 do
    if s ~= region then
      before = before + math.max(grant(at, s), grant(at - 1, s) * weight)
      after = after + math.max(grant(at, s), grant(at + 1, s))
    end
  end
  local mine = grant(at, region)
  if grant(at - 1, region) * weight > limit - before or grant(at + 1, region) > limit - after then return 0 end
  return math.min(floor(limit - before) - mine, limit - after - mine)
end

local function add(name, amount) fields[name] = value(name) + amount end

-- The region's share of the next window beyond its floor, from this window's demand (the last one's
-- when none was reported yet); the next window's floors as the sums count them (a lapsed one is lent).
local function share()
  local pool = limit - floors(index + 1)
  local at = index
  local demand = sum('d', at)
  if demand == 0 then
    at = index - 1
    demand = sum('d', at)
  end
  if demand == 0 then return floor(pool * (1000 - reserve) / (1000 * regions)) end
  return floor(pool * (1000 - reserve) * value('d:' .. at .. ':' .. region) / (1000 * demand))
end

-- Fields of windows before the ledger's previous one are of no use to any rule: dropped.
local function load(key)
  fields = {}
  local flat = call('HGETALL', key)
  for i = 1, #flat, 2 do
    local kind, at = string.match(flat[i], '^([gd]):(%d+):%d+$')
    if kind and tonumber(at) >= current - 1 then fields[flat[i]] = tonumber(flat[i + 1]) end
  end
end

local function store(key)
  call('DEL', key)
  local args = {}
  for name, amount in pairs(fields) do
    args[#args + 1] = name
    args[#args + 1] = string.format('%d', amount)
  end
  if #args == 0 then return end
  call('HSET', key, unpack(args))
  call('PEXPIRE', key, int(ceil((current + 3) * window - now)))
end

local out = {}
for i = 1, #KEYS do
  local at = 10 + (i - 1) * 5
  local demand, want, claim = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), ARGV[at + 3] == '1'
  local release, before = tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5])
  load(KEYS[i])
  local mine = 'g:' .. index .. ':' .. region
  local mineNext = 'g:' .. (index + 1) .. ':' .. region
  local gained = 0
  if index >= current - 1 and index <= current + 1 then
    if demand > 0 then add('d:' .. index .. ':' .. region, demand) end
    if release > 0 then fields[mine] = math.max(0, value(mine) - release) end
    -- Its store has moved on: the window before weighs what the region admitted there.
    local mineBefore = 'g:' .. (index - 1) .. ':' .. region
    if sliding and before >= 0 and fields[mineBefore] then
      fields[mineBefore] = math.min(value(mineBefore), math.max(0, before - floorOf(index - 1, region)))
    end
    -- A sliding window's past cannot take more: its weight in the estimate was counted without it.
    if want > 0 and ((not sliding) or index >= current) then
      local granted = math.min(want, available(index))
      if granted > 0 then
        add(mine, granted)
        gained = granted
      end
    end
    if claim then
      local target = share()
      -- A sliding window: a region whose grant for the next window is below what it admits in this one
      -- admits nothing there until the weight falls; keeping what it holds and was asked for costs the
      -- others nothing (the larger of its two grants counts either way). What it is asked for in the
      -- whole window is the demand so far at the rate so far, less its floor (granted apart).
      if sliding then
        local elapsed = now - index * window
        if elapsed < window / 2 then elapsed = window / 2 elseif elapsed > window then elapsed = window end
        local asked = ceil(value('d:' .. index .. ':' .. region) * window / elapsed) - base
        target = math.max(target, math.min(value(mine), asked))
      end
      local granted = math.min(target - value(mineNext), available(index + 1))
      if granted > 0 then add(mineNext, granted) end
    end
  end
  store(KEYS[i])
  out[#out + 1] = base + value(mine)
  out[#out + 1] = base + value(mineNext)
  out[#out + 1] = total(index)
  out[#out + 1] = gained
end
return out
