--! prelude
-- Shared head of every sluice script: fast locals and the clock.
local call = redis.call
local floor, ceil = math.floor, math.ceil
-- Slack for float comparisons; the TypeScript twins use the same values. Counts are small
-- numbers, but times near 1.7e12 ms carry float steps of about 2.4e-4 ms: one microsecond covers them.
local EPSILON = 1e-6
local EPSILON_MS = 1e-3

-- Whether `now` came from TIME. Expiries then run on the clock decisions are made by, so a key whose
-- expiry already marks the right moment may keep it (SET ... KEEPTTL). A caller's clock may run
-- backwards or slower than Redis's, and then every write sets its expiry anew.
local server_clock = false

-- A whole number as a command's argument. Redis turns a Lua number into text with %.17g, which costs
-- more than the INCRBY it feeds (0.3 µs a call, measured); a cost of 1, the usual one, is a constant.
local function int(n)
  if n == 1 then return '1' end
  return string.format('%d', n)
end

-- Values the batch script read ahead with one MGET (see single.lua), by key; nil elsewhere.
local ahead = nil

-- A key's value, as GET gives it. The first read of a key in a batch takes the value read ahead,
-- which no write of this batch can have changed yet (each decision writes only its own key, after
-- reading it); later reads of the same key go to GET and see the writes before them. A key MGET
-- found empty is read again with GET, which answers nil for a missing key and raises WRONGTYPE for
-- a key of another type (MGET answers nil for both).
local function get(key)
  if ahead then
    local value = ahead[key]
    ahead[key] = nil
    if value then return value end
  end
  return call('GET', key)
end

-- The time in ms: the caller's when given (tests replay timelines), else the server's.
-- TIME inside the script: app servers disagree about the clock.
local function clock(given)
  local now = tonumber(given)
  if now then return now end
  server_clock = true
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
