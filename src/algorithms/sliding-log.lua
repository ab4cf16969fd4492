--! algorithm
-- Sliding window log: a sorted set per identifier, one entry per unit used, scored by time in ms.
-- Members are sequence numbers behind a letter giving their length ("c123" is 123, "d1000" is 1000),
-- so the highest sorts last; they stay unique even for entries of the same millisecond.
-- Twin of sliding-log.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- sliding_log(key, now, op, cost, limit, window, max_debt)
--   -> allowed, remaining, resetMs, retryAfterMs (and for a charge: debt, cut off)
--   op: '0' limit, '1' peek, '2' refund, '3' charge, '7' takeUpTo; window in ms; max_debt: a charge's only.
-- A charge adds an entry per unit as usage does, up to limit + max_debt entries (max_debt is at most
-- the log's largest limit, so a log holds at most twice it); its retryAfterMs is for a cost of 1.

-- Adds `cost` entries at `now`, numbered on from `sequence`. ZADD in slices: Lua's unpack has a small stack.
local function sliding_log_add(key, now, cost, sequence, window)
  local done = 0
  while done < cost do
    local slice = {}
    local upto = done + 500
    if upto > cost then upto = cost end
    for j = done + 1, upto do
      local digits = string.format('%d', sequence + j)
      slice[#slice + 1] = now
      slice[#slice + 1] = string.char(96 + #digits) .. digits
    end
    call('ZADD', key, unpack(slice))
    done = upto
  end
  call('PEXPIRE', key, ceil(window))
end

local function sliding_log(key, now, op, cost, limit, window, max_debt)
  -- takeUpTo (op '7'): as many units as are free, up to cost, at least 1; else a refusal of 1 that
  -- takes nothing. A look at one unit says how many are free, a limit of that many takes them; the
  -- one field is the units granted (the twin: algorithms/take-up-to.ts).
  if op == '7' then
    local _, free = sliding_log(key, now, '1', 1, limit, window, max_debt)
    local granted = free < cost and free or cost
    local allowed, remaining, reset, retry = sliding_log(key, now, '0', granted > 0 and granted or 1, limit, window, max_debt)
    return allowed, remaining, reset, retry, allowed == 1 and granted or 0
  end
  local sequence = 0
  local newest = nil
  local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[1] then
    sequence = tonumber(string.sub(last[1], 2))
    newest = tonumber(last[2])
    -- Time never runs backwards for one log, so members stay unique and ordered.
    if newest > now then now = newest end
  end
  -- An entry at time t counts while now < t + window.
  call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = call('ZCARD', key)
  if count == 0 then newest = nil end
  local allowed = 1
  local retry = 0
  if op == '3' then
    local taken = limit + max_debt - count
    if taken < 0 then taken = 0 end
    if taken > cost then taken = cost end
    if taken > 0 then
      sliding_log_add(key, now, taken, sequence, window)
      count = count + taken
      newest = now
    end
    if count + 1 > limit then
      local rank = count - limit
      retry = ceil(tonumber(call('ZRANGE', key, rank, rank, 'WITHSCORES')[2]) + window - now)
    end
    local debt = count - limit
    if debt < 0 then debt = 0 end
    local reset = 0
    if newest then reset = ceil(newest + window - now) end
    return 1, limit - count > 0 and limit - count or 0, reset, retry, debt, cost - taken
  elseif op == '2' then
    if count > 0 then
      call('ZPOPMAX', key, cost)
      count = count - cost
      if count < 0 then count = 0 end
      if count > 0 then
        newest = tonumber(call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
      else
        newest = nil
      end
    end
  elseif count + cost > limit then
    -- A denied request consumes nothing; it waits for the entry that would make room to leave.
    allowed = 0
    local rank = count + cost - limit - 1
    retry = ceil(tonumber(call('ZRANGE', key, rank, rank, 'WITHSCORES')[2]) + window - now)
  elseif op == '0' then
    sliding_log_add(key, now, cost, sequence, window)
    count = count + cost
    newest = now
  end
  local reset = 0
  if newest then reset = ceil(newest + window - now) end
  -- A limit lowered for this call (a plan changed mid-window) may be below what the log holds.
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  return allowed, remaining, reset, retry
end
