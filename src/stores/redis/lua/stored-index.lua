--! script
-- Body of the script that keeps a limiter's index of stored limits or denials, after prelude.lua.
-- KEYS[1]: the index, a sorted set (src/keys.ts: `<prefix>:<name>:%limit` or `%deny`).
-- ARGV: now in ms ('' reads the server clock), an identifier's member, and how long its entry is
--       kept in ms: '' removes the member, 'inf' keeps it until removed.
-- Each member is scored by when its entry ends; members that ended are dropped at every write. The
-- index expires with its last member, or never while it lists a limit kept until cleared.
local now = clock(ARGV[1])
local index, member, ttl = KEYS[1], ARGV[2], ARGV[3]
if ttl == '' then
  call('ZREM', index, member)
elseif ttl == 'inf' then
  call('ZADD', index, 'inf', member)
else
  call('ZADD', index, string.format('%d', ceil(now + tonumber(ttl))), member)
end
call('ZREMRANGEBYSCORE', index, '-inf', string.format('%d', floor(now)))
local last = call('ZRANGE', index, -1, -1, 'WITHSCORES')
local score = last[2]
if score == nil then return 0 end
if score == 'inf' then
  call('PERSIST', index)
else
  local left = ceil(tonumber(score) - now)
  if left < 1 then left = 1 end
  call('PEXPIRE', index, string.format('%d', left))
end
return 1
