-- Shared head of every sluice script: fast locals and the clock.
local call = redis.call
local floor, ceil = math.floor, math.ceil
-- Slack for float comparisons; the TypeScript twins use the same values. Counts are small
-- numbers, but times near 1.7e12 ms carry float steps of about 2.4e-4 ms: one microsecond covers them.
local EPSILON = 1e-6
local EPSILON_MS = 1e-3

-- The time in ms: the caller's when given (tests replay timelines), else the server's.
-- TIME inside the script: app servers disagree about the clock.
local function clock(given)
  local now = tonumber(given)
  if now then return now end
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
