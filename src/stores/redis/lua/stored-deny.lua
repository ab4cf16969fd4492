--! script
-- Body of the script that denies an identifier (limiter.deny), after prelude.lua.
-- KEYS[1]: the identifier's denial (its state key with '%deny' appended, src/keys.ts).
-- ARGV: now in ms ('' reads the server clock), how long the denial lasts in ms.
-- Stores when the denial ends, in the clock decisions are made by, so that a decision compares it
-- with its own `now` (stored.lua); the key expires then too. Returns that end.
local now = clock(ARGV[1])
local length = tonumber(ARGV[2])
local ends = floor(now) + length
call('SET', KEYS[1], string.format('%d', ends), 'PX', ARGV[2])
return ends
