-- Shared head of every sluice script: fast locals and the clock.
local call = redis.call
local floor, ceil = math.floor, math.ceil
-- Slack for float comparisons, in ms; the TypeScript twins use the same value.
local EPSILON = 1e-6

-- The time in ms: the caller's when given (tests replay timelines), else the server's.
-- TIME inside the script: app servers disagree about the clock.
local function clock(given)
  local now = tonumber(given)
  if now then return now end
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
