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
-- On the server's clock, Redis's own clock in whole ms when the script read TIME (see set_for).
local server_ms = nil

-- A whole number as a command's argument. Redis turns a Lua number into text with %.17g, which costs
-- more than the INCRBY it feeds (0.3 µs a call, measured); a cost of 1, the usual one, is a constant.
local function int(n)
  if n == 1 then return '1' end
  return string.format('%d', n)
end

-- Values the batch script read ahead with one MGET (see single.lua), by key; nil elsewhere.
local ahead = nil
-- In `ahead`: a key the batch found missing (MGET's nil, and EXISTS said no key of any type).
local ABSENT = {}

-- A key's value, as GET gives it. The first read of a key in a batch takes the value read ahead,
-- which no write of this batch can have changed yet (each decision writes only its own key, after
-- reading it); later reads of the same key go to GET and see the writes before them. A key MGET
-- found empty is known missing when one EXISTS for the batch's empty keys found none (the usual
-- case: an idle identifier's key has expired); otherwise it is read again with GET, which answers
-- nil for a missing key and raises WRONGTYPE for a key of another type (MGET answers nil for both).
local function get(key)
  if ahead then
    local value = ahead[key]
    ahead[key] = nil
    if value == ABSENT then return false end
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
  local seconds, micros = tonumber(t[1]), tonumber(t[2])
  server_ms = seconds * 1000 + floor(micros / 1000)
  return seconds * 1000 + micros / 1000
end

-- Writes a key's value with an expiry `ms` from now (a whole number > 0). On the server's clock the
-- expiry goes as the moment PX would compute (Redis's ms clock plus ms, read when the script began
-- rather than a few µs later): PXAT spares Redis a clock read and, on 7.0, the rewrite of the
-- command for replication, about 0.3 µs of the 2 µs a SET ... PX takes here (measured over 64-key
-- batches, 10 alternating rounds). A caller's clock says nothing of Redis's: then PX.
local function set_for(key, value, ms)
  if server_ms then return call('SET', key, value, 'PXAT', string.format('%d', server_ms + ms)) end
  return call('SET', key, value, 'PX', int(ms))
end
