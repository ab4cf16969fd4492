--! algorithm reads-ahead also=budget-bucket-lease
-- A region's part of a global token bucket: one value per identifier,
-- "<tokens>:<last>:<extra>:<until>:<base>", its tokens at `last` (-1 for a full floor: a lease written
-- before any decision) and the lease it holds beyond its floor (`extra` tokens of capacity, with the
-- matching share of the rate, until `until` on the caller's clock).
-- Twin of budget-bucket.ts; the two change together. Composed into scripts after stores/redis/lua/prelude.lua.
-- budget_bucket(key, now, op, cost, tau, base) -> allowed, remaining, resetMs, retryAfterMs
--   op: '0' limit, '1' peek, '2' refund; tau: ms the bucket takes to fill; base: the floor's capacity.
-- budget_bucket_lease(key, now, op, extra, till, tau) -> 1, 0, 0, 0
--   writes the lease granted: `extra` tokens of capacity until `till`, from now on.

-- When a state reads as none at all: once its lease is over and `tau` has passed since, the floor's
-- tokens are full again, which is what no state means (a state Redis has yet to expire reads so too).
local function budget_bucket_gone_at(till, last, tau)
  return math.max(till, last) + tau
end

local function budget_bucket_read(key, now, tau)
  local stored = get(key)
  if not stored then return nil end
  local tokens, last, extra, till, base = string.match(stored, '^([^:]+):([^:]+):([^:]+):([^:]+):([^:]+)$')
  if not tokens then return nil end
  last, till = tonumber(last), tonumber(till)
  if now >= budget_bucket_gone_at(till, last, tau) then return nil end
  return tonumber(tokens), last, tonumber(extra), till, tonumber(base)
end

local function budget_bucket_capacity(now, extra, till, base)
  if now < till then return base + extra end
  return base
end

-- The tokens at `now`: refilled from `last` at the lease's rate while it held, then at the floor's,
-- and never above the capacity held at the time.
local function budget_bucket_tokens(tokens, last, extra, till, now, tau, base)
  if tokens < 0 then tokens = base end
  local at = last
  if now > at then
    if till > at then
      local stop = now
      if till < stop then stop = till end
      local capacity = base + extra
      tokens = math.min(capacity, tokens + (stop - at) * capacity / tau)
      at = stop
    end
    if now > at then tokens = math.min(base, tokens + (now - at) * base / tau) end
  end
  return math.min(tokens, budget_bucket_capacity(now, extra, till, base))
end

local function budget_bucket_write(key, tokens, last, extra, till, base, now, tau)
  call('SET', key, string.format('%.17g:%.17g:%.17g:%.17g:%.17g', tokens, last, extra, till, base),
    'PX', int(ceil(budget_bucket_gone_at(till, last, tau) - now)))
end

local function budget_bucket(key, now, op, cost, tau, base)
  local tokens, last, extra, till = budget_bucket_read(key, now, tau)
  if not tokens then
    -- No state reads as a full floor: the state lives until that is true.
    tokens, last, extra, till = base, now, 0, 0
  end
  tokens = budget_bucket_tokens(tokens, last, extra, till, now, tau, base)
  local capacity = budget_bucket_capacity(now, extra, till, base)
  local allowed = 1
  local retry = 0
  local write = false
  if op == '2' then
    tokens = math.min(capacity, tokens + cost)
    write = true
  elseif tokens + EPSILON < cost then
    allowed = 0
    if capacity >= cost then retry = ceil((cost - tokens) * tau / capacity) else retry = ceil(tau) end
  elseif op == '0' then
    tokens = tokens - cost
    if tokens < 0 then tokens = 0 end
    write = true
  end
  if write then
    if now > last then last = now end
    budget_bucket_write(key, tokens, last, extra, till, base, now, tau)
  end
  local reset = 0
  if capacity > 0 then reset = ceil((capacity - tokens) * tau / capacity) end
  return allowed, floor(tokens + EPSILON), reset, retry
end

local function budget_bucket_lease(key, now, op, extra, till, tau)
  local tokens, last, heldExtra, heldTill, base = budget_bucket_read(key, now, tau)
  if tokens and tokens >= 0 then
    tokens = budget_bucket_tokens(tokens, last, heldExtra, heldTill, now, tau, base)
    if now > last then last = now end
  else
    -- No decision since the state was last gone: a full floor now, which the next decision knows.
    tokens, last, base = -1, now, 0
  end
  budget_bucket_write(key, tokens, last, extra, till, base, now, tau)
  return 1, 0, 0, 0
end
