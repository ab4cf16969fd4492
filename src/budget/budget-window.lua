--! algorithm reads-ahead also=budget-window-grant,budget-window-release,budget-window-sync
-- A region's part of a global window budget: one value per identifier, "<index>:<count>:<grant>:<next>",
-- the window, the units admitted in it, what the ledger granted this region for it and for the next;
-- a sliding window's adds ":<previous>", the units admitted in the window before.
-- Twin of budget-window.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- Every function's `window` is in ms, negative for a sliding window (the scripts take two parameters
-- per policy; the sign carries the kind).
-- budget_window(key, now, op, cost, base, window) -> allowed, remaining, resetMs, retryAfterMs
--   op: '0' limit, '1' peek, '2' refund; base: the region's floor, its grant when nothing more was
--   granted; negative when the region does not hold its floor's lease (it then admits against its
--   grant less the floor). Admits while count + cost <= grant; a sliding window while
--   previous * (1 - elapsed) + count + cost <= grant (the region's own estimate within its grant).
-- budget_window_grant(key, now, op, amount, target, window) -> 1, count, grant, 0
--   raises the grant of window `target` (the current one or the next) to `amount`.
-- budget_window_sync(key, now, op, amount, target, window) -> 1, count, grant, 0
--   the ledger had granted `amount` for window `target` before: a grant below it was lost, and the
--   difference counts as used.
-- budget_window_release(key, now, op, amount, target, window) -> 1, given, grant, 0
--   lowers the grant of window `target` by up to `amount`, never below what was admitted. A sliding
--   window's target before the current one: 1, known (1 or 0), what the region admitted there, 0.

local function budget_window_read(key)
  local stored = get(key)
  if not stored then return nil end
  local index, count, grant, next, previous = string.match(stored, '^(%d+):(%d+):(%d+):(%d+):?(%d*)$')
  if not index then return nil end
  return tonumber(index), tonumber(count), tonumber(grant), tonumber(next), tonumber(previous) or 0
end

-- The window in ms, and whether it slides (a negative window).
local function budget_window_kind(window)
  if window < 0 then return -window, true end
  return window, false
end

-- What the region used of its grant at `now`, times the window: count * W, and for a sliding window
-- previous * (W - elapsed) on top. Integers times W, so that the twin and the script agree.
local function budget_window_used(count, previous, index, now, window, sliding)
  if not sliding or previous == 0 then return count * window end
  local left = (index + 1) * window - now
  if left < 0 then left = 0 end
  return count * window + previous * left
end

-- The counts of window `index`, rolled forward from what was stored; `current` when it held this window.
-- Returns count, grant, next, current, previous.
local function budget_window_roll(storedIndex, storedCount, storedGrant, storedNext, storedPrevious, index, base)
  if storedIndex == index then return storedCount, storedGrant, storedNext, true, storedPrevious end
  -- The grant claimed ahead for this window becomes its grant; the floor is granted in every window.
  local grant = base
  local previous = 0
  if storedIndex == index - 1 then
    if storedNext > grant then grant = storedNext end
    previous = storedCount
  end
  return 0, grant, 0, false, previous
end

-- Lives to the end of the window after its own (a grant may wait there); past that, a state reads as
-- none at all. A caller's clock decides these windows, so the expiry is set anew on every write.
local function budget_window_write(key, index, count, grant, next, previous, window, sliding, now)
  -- A fixed window keeps no previous count: its state is the four numbers it always was.
  local value = string.format('%d:%d:%d:%d', index, count, grant, next)
  if sliding then value = value .. string.format(':%d', previous) end
  call('SET', key, value, 'PX', int(ceil((index + 2) * window - now)))
end

local function budget_window(key, now, op, cost, base, window)
  local sliding
  window, sliding = budget_window_kind(window)
  local floorOff = base < 0
  if floorOff then base = -base end
  local index = floor(now / window)
  local untilEnd = ceil((index + 1) * window - now)
  local storedIndex, storedCount, storedGrant, storedNext, storedPrevious = budget_window_read(key)
  if storedIndex and storedIndex > index then
    -- Another process of the region, whose clock is ahead, moved on: this window's counts are gone.
    if op == '2' then return 1, 0, untilEnd, 0 end
    return 0, 0, untilEnd, ceil(storedIndex * window - now)
  end
  local count, grant, next, current, previous =
    budget_window_roll(storedIndex, storedCount, storedGrant, storedNext, storedPrevious, index, base)
  -- Grants are kept with the floor in them; a region whose floor lease lapsed admits what is beyond it.
  local usable = grant
  if floorOff then
    usable = grant - base
    if usable < 0 then usable = 0 end
  end
  local allowed = 1
  local retry = 0
  local write = false
  if op == '2' then
    count = count - cost
    if count < 0 then count = 0 end
    write = true
  elseif budget_window_used(count, previous, index, now, window, sliding) + cost * window > usable * window then
    allowed = 0
    retry = untilEnd
    -- A denial in a window not reached yet writes it, so that a grant arriving later finds it.
    write = op == '0' and not current
  elseif op == '0' then
    count = count + cost
    write = true
  end
  if write then budget_window_write(key, index, count, grant, next, previous, window, sliding, now) end
  local room = usable * window - budget_window_used(count, previous, index, now, window, sliding)
  local remaining = 0
  if room > 0 then remaining = floor(room / window) end
  local reset = 0
  if count > 0 or (sliding and previous > 0) then reset = untilEnd end
  return allowed, remaining, reset, retry
end

-- The state as the worker's writes (grant, release, sync) find it: rolled to the window `now` falls
-- in, or to a later one the state already holds (another process of the region, whose clock is ahead,
-- moved it on), with no floor (a write names the grant it means, floor included).
-- Returns window (ms), sliding, index, storedIndex (nil when none), count, grant, next, previous.
local function budget_window_rolled(key, now, window)
  local sliding
  window, sliding = budget_window_kind(window)
  local index = floor(now / window)
  local storedIndex, storedCount, storedGrant, storedNext, storedPrevious = budget_window_read(key)
  if storedIndex and storedIndex > index then index = storedIndex end
  local count, grant, next, _, previous =
    budget_window_roll(storedIndex, storedCount, storedGrant, storedNext, storedPrevious, index, 0)
  return window, sliding, index, storedIndex, count, grant, next, previous
end

local function budget_window_grant(key, now, op, amount, target, window)
  local window, sliding, index, storedIndex, count, grant, next, previous =
    budget_window_rolled(key, now, window)
  if target == index then
    if amount > grant then grant = amount end
    -- No state of this window or the one before: the region's store lost it (a region asks only for
    -- identifiers it decided for in the window), and what was granted before may have been admitted.
    if not storedIndex or storedIndex < index - 1 then count = grant end
  elseif target == index + 1 then
    if amount > next then next = amount end
  else
    return 1, count, grant, 0
  end
  budget_window_write(key, index, count, grant, next, previous, window, sliding, now)
  return 1, count, grant, 0
end

local function budget_window_release(key, now, op, amount, target, window)
  local window, sliding, index, storedIndex, count, grant, next, previous =
    budget_window_rolled(key, now, window)
  if sliding and target == index - 1 then
    -- Nothing to give back there: what the region admitted in that window, when known (a state of it,
    -- or one rolled out of it with a count; a state recreated after a loss has none).
    if storedIndex and (storedIndex == index - 1 or (storedIndex == index and previous > 0)) then
      return 1, 1, previous, 0
    end
    return 1, 0, 0, 0
  end
  local given = 0
  -- A state of a window before the previous one reads as none at all: nothing to give back. Never
  -- below what was admitted (a sliding window: the region's estimate now, which only falls from here).
  if storedIndex and storedIndex >= index - 1 and target == index then
    given = grant - ceil(budget_window_used(count, previous, index, now, window, sliding) / window)
    if given < 0 then given = 0 end
    if amount < given then given = amount end
  end
  if given == 0 then return 1, 0, grant, 0 end
  grant = grant - given
  budget_window_write(key, index, count, grant, next, previous, window, sliding, now)
  return 1, given, grant, 0
end

local function budget_window_sync(key, now, op, amount, target, window)
  local window, sliding, index, storedIndex, count, grant, next, previous =
    budget_window_rolled(key, now, window)
  if target ~= index or grant >= amount then return 1, count, grant, 0 end
  -- The store lost what it was granted: what it may have admitted of it counts as used.
  count = count + amount - grant
  grant = amount
  budget_window_write(key, index, count, grant, next, previous, window, sliding, now)
  return 1, count, grant, 0
end
