-- Saves a session state if its stored version is the expected one.
-- KEYS: session, sexp
-- ARGV: expected version ('' = create only), state JSON, default ttl ms ('0' = none),
--       expiry-record grace ms
-- Returns {1, new version} when saved, {0, stored version or ''} on a conflict.
local key, exp = KEYS[1], KEYS[2]
local cur = redis.call('HMGET', key, 'version', 'ttl_ms')
local ttl
local version
if ARGV[1] == '' then
  if cur[1] then return {0, cur[1]} end
  ttl = ARGV[3]
  redis.call('HSET', key, 'version', '1', 'state', ARGV[2], 'ttl_ms', ttl)
  version = 1
else
  if cur[1] ~= ARGV[1] then return {0, cur[1] or ''} end
  ttl = cur[2] or '0'
  redis.call('HSET', key, 'state', ARGV[2])
  version = redis.call('HINCRBY', key, 'version', 1)
end
if ttl ~= '0' then
  redis.call('PEXPIRE', key, ttl)
  expiry_record(exp, ttl, ARGV[4])
elseif ARGV[1] == '' then
  redis.call('DEL', exp)
end
return {1, version}
