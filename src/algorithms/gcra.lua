--! algorithm reads-ahead
-- GCRA, also the token bucket: one number per identifier, the theoretical arrival time (TAT) in ms.
-- Twin of gcra.ts, gcra-state.ts and gcra-schedule.ts; they change together. Composed into scripts
-- after stores/redis/lua/prelude.lua.
-- gcra(key, now, op, cost, interval, tolerance, operand, operand2)
--   -> allowed, remaining, resetMs, retryAfterMs (and for a charge: debt, cut off; for a schedule:
--   waitMs, pausedMs, shiftMs)
--   op: '0' limit, '1' peek, '2' refund, '3' charge, '4' schedule, '7' takeUpTo; interval: ms per unit; tolerance:
--   burst x interval, in ms. The operands: a charge's max_debt; a schedule's max_wait and pause_ms
--   (see gcra_schedule). A charge moves the TAT on past the tolerance, by at most max_debt units
--   more (tokens below zero); its retryAfterMs is for a cost of 1.
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
--
-- On the server's clock the integer is minus (2^52 + the µs) instead, and the key expires at the first
-- whole second of Redis's clock at or after the TAT, not at the TAT itself: it outlives its TAT by
-- less than a second, when a TAT in the past counts as now anyway. A decision that moves the
-- TAT within the same second then keeps the key's expiry, and INCRBY moves the integer in place: one
-- command that keeps the expiry (0.4 µs inside a script here) instead of SET ... PXAT, which removes
-- and re-adds it (1.4 µs). Only the server's clock says when Redis will expire a key, so a caller's
-- clock writes the first form, expiring at the TAT. Both forms are read whatever the clock.
local GCRA_DUE = 4503599627370496 -- 2^52: µs below it run until the year 2112

local function gcra_encode(tat)
  local micros = tat * 1000
  if micros == floor(micros) and micros < 9007199254740992 and micros / 1000 == tat then
    return string.format('%d', -micros)
  end
  return tat
end

local function gcra_decode(value)
  if value and value < 0 then
    if value < -GCRA_DUE then return (-value - GCRA_DUE) / 1000 end
    return -value / 1000
  end
  return value
end

-- The last step INCRBY took, with its text: a batch's steps are mostly alike (cost x interval), and
-- formatting one costs half the INCRBY.
local gcra_step, gcra_step_text = nil, nil

-- Keeps a TAT ahead of now with no pause. `held`: the integer the key holds when it is of the second
-- form (so that it expires at the second its TAT falls in, rounded up), else nil.
local function gcra_keep(key, tat, now, held)
  local micros = tat * 1000
  if server_ms and micros == floor(micros) and micros < GCRA_DUE and micros / 1000 == tat then
    local value = -(GCRA_DUE + micros)
    -- The second of Redis's clock the key expires at (see above).
    local due = ceil(micros / 1000000)
    if held and ceil((-held - GCRA_DUE) / 1000000) == due then
      local step = value - held
      if step ~= gcra_step then gcra_step, gcra_step_text = step, string.format('%d', step) end
      call('INCRBY', key, gcra_step_text)
    else
      call('SET', key, string.format('%d', value), 'PXAT', string.format('%d', due * 1000))
    end
    return
  end
  set_for(key, gcra_encode(tat), ceil(tat - now))
end

-- The TAT from a key's value, and the pause an upstream asked for while it holds (throttle()):
-- then the key holds "<tat> <paused until, whole ms> <shift, whole ms>", in the same key so that no other is read.
local function gcra_read(stored, now)
  local value = tonumber(stored)
  if value == nil and stored then
    local tat, paused_until, shift = string.match(stored, '^(%S+) (%d+) (%d+)$')
    paused_until = tonumber(paused_until)
    if paused_until and paused_until > now then
      return gcra_decode(tonumber(tat)), paused_until, tonumber(shift)
    end
    return gcra_decode(tonumber(tat)), nil, nil
  end
  return gcra_decode(value), nil, nil
end

-- Keeps the TAT (with the pause while it holds, which never outlasts the TAT: see gcra_floor), or
-- deletes the key when nothing is owed.
local function gcra_write(key, tat, now, paused_until, shift)
  if tat <= now then
    call('DEL', key)
    return
  end
  if not paused_until then return gcra_keep(key, tat, now, nil) end
  local value = gcra_encode(tat)
  if type(value) == 'number' then value = string.format('%.17g', value) end
  set_for(key, value .. string.format(' %d %d', paused_until, shift), ceil(tat - now))
end

-- The lowest TAT while a pause holds: the first unit after the pause comes when it ends, the next
-- ones an interval apart (a full burst would meet an upstream that has just said it is overwhelmed).
local function gcra_floor(paused_until, interval, tolerance)
  return paused_until + tolerance - interval
end

-- op '4': schedules the request in the first slot where it fits; the TAT moves on at once and the
-- caller sleeps until the slot (waitMs, rounded up). A slot further away than max_wait (ms; -1 only
-- reads) takes nothing. pause_ms (0 for none): an upstream's pause; no slot before it ends, and the
-- slots already handed out move on by what it adds (shiftMs), so their holders can follow.
local function gcra_schedule(key, tat, paused_until, shift, now, cost, interval, tolerance, max_wait, pause_ms)
  local write = false
  if pause_ms > 0 then
    local ends = ceil(now + pause_ms)
    if paused_until == nil or ends > paused_until then
      shift = ends - (paused_until or floor(now))
      paused_until = ends
      tat = tat + shift
      local lowest = gcra_floor(ends, interval, tolerance)
      if tat < lowest then tat = lowest end
      write = true
    end
  end
  local next = tat + cost * interval
  local wait = next - tolerance - now
  local wait_ms = 0
  if wait > EPSILON_MS then wait_ms = ceil(wait - EPSILON_MS) end
  local allowed, retry = 1, 0
  if wait_ms <= max_wait then
    tat = next
    write = true
  else
    allowed, retry = 0, wait_ms - max_wait
  end
  if write then gcra_write(key, tat, now, paused_until, shift) end
  local paused_ms = 0
  if paused_until then paused_ms = ceil(paused_until - now) else shift = 0 end
  return allowed, gcra_units(tat, now, interval, tolerance), ceil(tat - now), retry, wait_ms, paused_ms, shift
end

local function gcra(key, now, op, cost, interval, tolerance, operand, operand2)
  -- takeUpTo (op '7'): as many units as are free, up to cost, at least 1; else a refusal of 1 that
  -- takes nothing. A look at one unit says how many are free, a limit of that many takes them; the
  -- one field is the units granted (the twin: algorithms/take-up-to.ts).
  if op == '7' then
    local _, free = gcra(key, now, '1', 1, interval, tolerance)
    local granted = free < cost and free or cost
    local allowed, remaining, reset, retry = gcra(key, now, '0', granted > 0 and granted or 1, interval, tolerance)
    return allowed, remaining, reset, retry, allowed == 1 and granted or 0
  end
  -- The usual value is a number, read here rather than through gcra_read (a decision's hot path).
  local stored = get(key)
  local tat, paused_until, shift = tonumber(stored), nil, nil
  local held = nil
  if tat == nil and stored then
    tat, paused_until, shift = gcra_read(stored, now)
  elseif tat and tat < 0 then
    if tat < -GCRA_DUE then
      held = tat
      tat = (-tat - GCRA_DUE) / 1000
    else
      tat = -tat / 1000
    end
  end
  tat = tat or now
  if tat < now then tat = now end
  if op == '4' then
    return gcra_schedule(key, tat, paused_until, shift, now, cost, interval, tolerance,
      tonumber(operand), tonumber(operand2))
  end
  local allowed = 1
  local retry = 0
  local write = false
  local debt, cut = nil, nil
  if op == '3' then
    local taken = gcra_units(tat, now, interval, tolerance + tonumber(operand) * interval)
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
    -- A pause keeps its floor: giving back never lets a unit in before the pause ends.
    if paused_until then
      local lowest = gcra_floor(paused_until, interval, tolerance)
      if tat < lowest then tat = lowest end
    end
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
    if paused_until == nil and tat > now then
      gcra_keep(key, tat, now, held)
    else
      gcra_write(key, tat, now, paused_until, shift)
    end
  end
  return allowed, gcra_units(tat, now, interval, tolerance), ceil(tat - now), retry, debt, cut
end
