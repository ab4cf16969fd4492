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
-- both make the same numbers. `rule` and its operands are the policy's limitRule (variants.ts). A
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

-- Reads what is stored for every key of a call with one MGET (one command for the batch, not two
-- per key): the denial of key i at 2i - 1 and its limit at 2i, false when absent or not asked for.
-- `reads` is one value for every key, or a table with one per key. Decisions write no entry, so
-- what is read first stays true for the whole call.
local function stored_entries(keys, reads)
  local names, at = {}, {}
  local uniform = type(reads) ~= 'table'
  for i = 1, #keys do
    local r = uniform and reads or reads[i]
    if r % 2 == 1 then
      names[#names + 1] = keys[i] .. '%deny'
      at[#names] = 2 * i - 1
    end
    if r >= 2 then
      names[#names + 1] = keys[i] .. '%limit'
      at[#names] = 2 * i
    end
  end
  local values = {}
  if #names > 0 then
    local found = call('MGET', unpack(names))
    for j = 1, #names do values[at[j]] = found[j] end
  end
  return values
end

-- Decides one key as `decide` would, after what is stored for it (`denial` and `limit` as read by
-- stored_entries). Returns the decision's four values and what was applied: the stored limit used,
-- 0 for none, -1 for a denial (the quota is not looked at, and nothing is taken). A denial ends at
-- the time its value names, in the decisions' clock. Operations that ask for units read the denial
-- (reads' first bit); such a request asking more than a smaller stored limit ever grants is refused,
-- taking nothing, with what a look at one unit says and a retry after the limit's period (the cost
-- was checked against the policy's own limit only).
local function decide_stored(decide, key, now, op, cost, first, second, reads, denial, limit, rule, own,
                             share, x, y)
  local asks = reads % 2 == 1
  if asks and denial then
    local ends = tonumber(denial)
    if ends and ends > now then
      local left = ceil(ends - now)
      return 0, 0, left, left, -1
    end
  end
  local applied = 0
  limit = limit and tonumber(limit)
  -- Only what setLimit writes is applied: a whole number of at least 1.
  if limit and limit >= 1 and limit == floor(limit) then
    local f, s, most = limit_params(limit, first, second, rule, own, share, x, y)
    if f then
      first, second, applied = f, s, limit
      if asks and cost > most then
        local _, remaining, reset = decide(key, now, '1', 1, first, second)
        return 0, remaining, reset, ceil(second - EPSILON_MS), applied
      end
    end
  end
  local allowed, remaining, reset, retry = decide(key, now, op, cost, first, second)
  return allowed, remaining, reset, retry, applied
end
