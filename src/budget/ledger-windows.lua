--! script
-- The ledger of a window budget (fixed or sliding): one hash per identifier, `g:<window>:<region>` units
-- granted to a region beyond its floor and `d:<window>:<region>` units it reported asked of it.
-- Twin of ledger-windows.ts; the two change together. Composed after stores/redis/lua/prelude.lua.
-- KEYS: one ledger per identifier.
-- ARGV: now ('' reads the server clock), region, regions, window (ms), limit, floor, reserve
--       (thousandths), sliding ('1' or '0'), the asker's window index; then per key: demand, want,
--       claim, release.
-- Returns per key: the region's grant for its window and for the next (floor included), all regions'
-- grants for its window, and what this call granted the region for its window.
local now = clock(ARGV[1])
local region, regions, window = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local limit, base, reserve = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local sliding, index = ARGV[8] == '1', tonumber(ARGV[9])
local current = floor(now / window)
local fields

local function value(name) return fields[name] or 0 end

local function sum(kind, at)
  local total = 0
  for s = 0, regions - 1 do total = total + value(kind .. ':' .. at .. ':' .. s) end
  return total
end

local function total(at) return regions * base + sum('g', at) end

local function available(at)
  if not sliding then return limit - total(at) end
  local elapsed = (now - at * window) / window
  if elapsed < 0 then elapsed = 0 elseif elapsed > 1 then elapsed = 1 end
  -- What this window may take now, and what it may weigh as the previous one when the next starts
  -- (with what the next was granted ahead).
  local room = floor(limit - total(at - 1) * (1 - elapsed) - total(at))
  return math.min(room, limit - total(at) - total(at + 1))
end

local function add(name, amount) fields[name] = value(name) + amount end

-- The region's share of the next window beyond its floor, from this window's demand (the last one's
-- when none was reported yet).
local function share()
  local pool = limit - regions * base
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
  local at = 9 + (i - 1) * 4
  local demand, want, claim = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), ARGV[at + 3] == '1'
  local release = tonumber(ARGV[at + 4])
  load(KEYS[i])
  local mine = 'g:' .. index .. ':' .. region
  local mineNext = 'g:' .. (index + 1) .. ':' .. region
  local gained = 0
  if index >= current - 1 and index <= current + 1 then
    if demand > 0 then add('d:' .. index .. ':' .. region, demand) end
    if release > 0 then fields[mine] = math.max(0, value(mine) - release) end
    -- A sliding window's past cannot take more: its weight in the estimate was counted without it.
    if want > 0 and ((not sliding) or index >= current) then
      local granted = math.min(want, available(index))
      if granted > 0 then
        add(mine, granted)
        gained = granted
      end
    end
    if claim then
      local granted = math.min(share() - value(mineNext), available(index + 1))
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
