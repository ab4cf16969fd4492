-- GCRA, also the token bucket: one number per identifier, the theoretical arrival time (TAT) in ms.
-- Twin of gcra.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- gcra(key, now, op, cost, interval, tolerance, max_debt)
--   -> allowed, remaining, resetMs, retryAfterMs (and for a charge: debt, cut off)
--   op: '0' limit, '1' peek, '2' refund, '3' charge; interval: ms per unit; tolerance: burst x
--   interval, in ms; max_debt: a charge's only. A charge moves the TAT on past the tolerance, by at
--   most max_debt units more (tokens below zero); its retryAfterMs is for a cost of 1.
-- Whole units that fit now: the largest n with tat + n x interval - now <= tolerance, by the very
-- comparison a request of cost n meets, so `remaining` never disagrees with the next decision.
local function gcra_units(tat, now, interval, tolerance)
  local n = floor((tolerance - (tat - now)) / interval)
  if n < 0 then n = 0 end
  while tat + (n + 1) * interval - now <= tolerance + EPSILON_MS do n = n + 1 end
  while n > 0 and tat + n * interval - now > tolerance + EPSILON_MS do n = n - 1 end
  return n
end

-- The TAT is kept exactly. When it is a whole number of microseconds (a clock with microsecond steps,
-- such as TIME, and an interval of whole microseconds) it is stored as minus that number: an integer
-- that Redis keeps inside the key's object (72 bytes per key here, against 104 for the 17-digit
-- decimal). A TAT is never negative, so the sign tells the two forms apart.
local function gcra_encode(tat)
  local micros = tat * 1000
  if micros == floor(micros) and micros < 9007199254740992 and micros / 1000 == tat then
    return string.format('%d', -micros)
  end
  return tat
end

local function gcra_decode(stored)
  local value = tonumber(stored)
  if value and value < 0 then return -value / 1000 end
  return value
end

local function gcra(key, now, op, cost, interval, tolerance, max_debt)
  local tat = gcra_decode(get(key)) or now
  if tat < now then tat = now end
  local allowed = 1
  local retry = 0
  local write = false
  local debt, cut = nil, nil
  if op == '3' then
    local taken = gcra_units(tat, now, interval, tolerance + max_debt * interval)
    if taken > cost then taken = cost end
    if taken > 0 then
      tat = tat + taken * interval
      write = true
    end
    local next = tat + interval
    if next - now > tolerance + EPSILON_MS then retry = ceil(next - tolerance - now - EPSILON_MS) end
    -- The fewest units whose return brings the TAT back within the tolerance.
    debt = ceil((tat - now - tolerance - EPSILON_MS) / interval)
    if debt < 0 then debt = 0 end
    cut = cost - taken
  elseif op == '2' then
    tat = tat - cost * interval
    if tat < now then tat = now end
    write = true
  else
    local next = tat + cost * interval
    if next - now > tolerance + EPSILON_MS then
      -- A denied request consumes nothing.
      allowed = 0
      retry = ceil(next - tolerance - now - EPSILON_MS)
    elseif op == '0' then
      tat = next
      write = true
    end
  end
  if write then
    if tat > now then
      call('SET', key, gcra_encode(tat), 'PX', int(ceil(tat - now)))
    else
      call('DEL', key)
    end
  end
  return allowed, gcra_units(tat, now, interval, tolerance), ceil(tat - now), retry, debt, cut
end
