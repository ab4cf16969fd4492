-- A region's part of a global window budget: one value per identifier, "<index>:<count>:<grant>:<next>",
-- the window, the units admitted in it, what the ledger granted this region for it and for the next.
-- Twin of budget-window.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- budget_window(key, now, op, cost, base, window) -> allowed, remaining, resetMs, retryAfterMs
--   op: '0' limit, '1' peek, '2' refund; base: the region's floor, its grant when nothing more was
--   granted; window in ms.
-- budget_window_grant(key, now, op, amount, target, window) -> 1, count, grant, 0
--   raises the grant of window `target` (the current one or the next) to `amount`.
-- budget_window_sync(key, now, op, amount, target, window) -> 1, count, grant, 0
--   the ledger had granted `amount` for window `target` before: a grant below it was lost, and the
--   difference counts as used.
-- budget_window_release(key, now, op, amount, target, window) -> 1, given, grant, 0
--   lowers the grant of window `target` by up to `amount`, never below what was admitted.

local function budget_window_read(key)
  local stored = get(key)
  if not stored then return nil end
  local index, count, grant, next = string.match(stored, '^(%d+):(%d+):(%d+):(%d+)$')
  if not index then return nil end
  return tonumber(index), tonumber(count), tonumber(grant), tonumber(next)
end

-- The counts of window `index`, rolled forward from what was stored; `current` when it held this window.
local function budget_window_roll(storedIndex, storedCount, storedGrant, storedNext, index, base)
  if storedIndex == index then return storedCount, storedGrant, storedNext, true end
  -- The grant claimed ahead for this window becomes its grant; the floor is granted in every window.
  local grant = base
  if storedIndex == index - 1 and storedNext > grant then grant = storedNext end
  return 0, grant, 0, false
end

-- Lives to the end of the window after its own (a grant may wait there); past that, a state reads as
-- none at all. A caller's clock decides these windows, so the expiry is set anew on every write.
local function budget_window_write(key, index, count, grant, next, window, now)
  call('SET', key, string.format('%d:%d:%d:%d', index, count, grant, next), 'PX', int(ceil((index + 2) * window - now)))
end

local function budget_window(key, now, op, cost, base, window)
  local index = floor(now / window)
  local untilEnd = ceil((index + 1) * window - now)
  local storedIndex, storedCount, storedGrant, storedNext = budget_window_read(key)
  if storedIndex and storedIndex > index then
    -- Another process of the region, whose clock is ahead, moved on: this window's counts are gone.
    if op == '2' then return 1, 0, untilEnd, 0 end
    return 0, 0, untilEnd, ceil(storedIndex * window - now)
  end
  local count, grant, next, current = budget_window_roll(storedIndex, storedCount, storedGrant, storedNext, index, base)
  local allowed = 1
  local retry = 0
  local write = false
  if op == '2' then
    count = count - cost
    if count < 0 then count = 0 end
    write = true
  elseif count + cost > grant then
    allowed = 0
    retry = untilEnd
    -- A denial in a window not reached yet writes it, so that a grant arriving later finds it.
    write = op == '0' and not current
  elseif op == '0' then
    count = count + cost
    write = true
  end
  if write then budget_window_write(key, index, count, grant, next, window, now) end
  local remaining = 0
  if count < grant then remaining = grant - count end
  local reset = 0
  if count > 0 then reset = untilEnd end
  return allowed, remaining, reset, retry
end

local function budget_window_grant(key, now, op, amount, target, window)
  local index = floor(now / window)
  local storedIndex, storedCount, storedGrant, storedNext = budget_window_read(key)
  if storedIndex and storedIndex > index then index = storedIndex end
  local count, grant, next = budget_window_roll(storedIndex, storedCount, storedGrant, storedNext, index, 0)
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
  budget_window_write(key, index, count, grant, next, window, now)
  return 1, count, grant, 0
end

local function budget_window_release(key, now, op, amount, target, window)
  local index = floor(now / window)
  local storedIndex, storedCount, storedGrant, storedNext = budget_window_read(key)
  if storedIndex and storedIndex > index then index = storedIndex end
  local count, grant, next = budget_window_roll(storedIndex, storedCount, storedGrant, storedNext, index, 0)
  local given = 0
  -- A state of a window before the previous one reads as none at all: nothing to give back.
  if storedIndex and storedIndex >= index - 1 and target == index then
    given = grant - count
    if given < 0 then given = 0 end
    if amount < given then given = amount end
  end
  if given == 0 then return 1, 0, grant, 0 end
  grant = grant - given
  budget_window_write(key, index, count, grant, next, window, now)
  return 1, given, grant, 0
end

local function budget_window_sync(key, now, op, amount, target, window)
  local index = floor(now / window)
  local storedIndex, storedCount, storedGrant, storedNext = budget_window_read(key)
  if storedIndex and storedIndex > index then index = storedIndex end
  local count, grant, next = budget_window_roll(storedIndex, storedCount, storedGrant, storedNext, index, 0)
  if target ~= index or grant >= amount then return 1, count, grant, 0 end
  -- The store lost what it was granted: what it may have admitted of it counts as used.
  count = count + amount - grant
  grant = amount
  budget_window_write(key, index, count, grant, next, window, now)
  return 1, count, grant, 0
end
