--! decision-helpers
-- What an operator stored for an identifier (the limiter option `overrides`), read by the decision's own
-- script: a denial and a limit, kept beside the state under its key with '%deny' and '%limit' appended
-- (src/keys.ts), so they share its hash tag and slot. Composed after prelude.lua and the algorithms.
-- reads: 1 the denial, 2 the limit, 3 both (STORED_READS in src/types.ts).

-- A window policy's share of a limit, and a burst's: share.ts's scaleLimit and scaleBurst.
local SLACK = 1e-9
local function scale_burst(units, share)
  if share == 1 then return units end
  local scaled = floor(units * share + SLACK)
  if scaled < 1 then return 1 end
  return scaled
end

-- The policy's parameters for a stored limit, and the most one request may then ask (its maxCost):
-- the rule of its withLimit() in TypeScript, computed with the same operations in the same order, so
-- both make the same numbers. `rule` and its operands are the policy's rule.storedLimit (wire.ts). A
-- limit the policy cannot take (its share would be under one unit, the log's over its ceiling) is
-- not applied: nil says so. The policy's own limit gives its own parameters, whose cost was checked.
local function limit_params(limit, first, second, rule, own, share, x, y)
  if limit == own then return first, second, math.huge end
  if rule == 'count' then
    local units = limit
    if share ~= 1 then units = floor(limit * share + SLACK) end
    if units < 1 or (x > 0 and units > x) then return nil end
    return units, second, units
  elseif rule == 'rate' then
    local interval = x / (limit * share)
    local burst = floor(y * (limit / own) + SLACK)
    if burst < 1 then burst = 1 end
    burst = scale_burst(burst, share)
    return interval, burst * interval, burst
  elseif rule == 'capacity' then
    local refill = (x * limit) / own
    local interval = 1000 / (refill * share)
    local capacity = scale_burst(limit, share)
    return interval, capacity * interval, capacity
  end
  return nil
end

-- Reads what is stored for every key of a call with one MGET (one command for the call, not two per
-- key). `reads` is one value for every key: the reply then holds, per key, its denial when asked
-- for, then its limit when asked for; `stored_at` finds them. Decisions write no entry, so what is
-- read first stays true for the whole call.
local function stored_entries(keys, reads)
  local names, n = {}, 0
  local deny, limit = reads % 2 == 1, reads >= 2
  for i = 1, #keys do
    local key = keys[i]
    if deny then
      n = n + 1
      names[n] = key .. '%deny'
    end
    if limit then
      n = n + 1
      names[n] = key .. '%limit'
    end
  end
  if n == 0 then return {} end
  return call('MGET', unpack(names))
end

-- The denial and the limit of the i-th key in what stored_entries read with `reads`; nil for a kind
-- not read, false for one absent.
local function stored_at(entries, i, reads)
  if reads == 3 then return entries[2 * i - 1], entries[2 * i] end
  if reads == 1 then return entries[i], nil end
  if reads == 2 then return nil, entries[i] end
  return nil, nil
end

-- Decides one key as `decide` would, after what is stored for it (`denial` and `limit` as read by
-- stored_entries). Returns what `decide` returns (an operation's fields after the decision's four
-- values, up to three: a charge's debt and cut off, a schedule's wait, pause and shift, a lease's
-- (concurrency.lua, whose calls may carry two operands); nil for other operations, and for a key
-- refused here) and what was applied: the stored limit used,
-- 0 for none, -1 for a denial (the quota is not looked at, and nothing is taken). A denial ends at
-- the time its value names, in the decisions' clock. Operations that ask for units read the denial
-- (reads' first bit); such a request asking more than a smaller stored limit ever grants is refused,
-- taking nothing, with what a look at one unit says and a retry after the limit's period (the cost
-- was checked against the policy's own limit only).
local function decide_stored(decide, key, now, op, cost, first, second, operand, reads, denial, limit,
                             rule, own, share, x, y, follows, operand2)
  local asks = reads % 2 == 1
  if asks and denial then
    local ends = tonumber(denial)
    if ends and ends > now then
      local left = ceil(ends - now)
      return 0, 0, left, left, nil, nil, nil, -1
    end
  end
  local applied = 0
  -- A key that does not read its limit (a call that gives its own) may have been given it all the same.
  limit = reads >= 2 and limit and tonumber(limit)
  -- Only what setLimit writes is applied: a whole number of at least 1.
  if limit and limit >= 1 and limit == floor(limit) then
    local f, s, most = limit_params(limit, first, second, rule, own, share, x, y)
    if f then
      first, second, applied = f, s, limit
      -- A charge may owe one allowance of the limit applied, unless the policy set its own maxDebt.
      if op == '3' and follows and most ~= math.huge then operand = most end
      if asks and cost > most then
        local _, remaining, reset = decide(key, now, '1', 1, first, second)
        return 0, remaining, reset, ceil(second - EPSILON_MS), nil, nil, nil, applied
      end
    end
  end
  local allowed, remaining, reset, retry, field1, field2, field3 =
    decide(key, now, op, cost, first, second, operand, operand2)
  return allowed, remaining, reset, retry, field1, field2, field3, applied
end
