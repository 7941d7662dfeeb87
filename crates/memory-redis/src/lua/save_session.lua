-- Saves a session state if its stored version is the expected one.
-- KEYS: session, sexp
-- ARGV: expected version ('' = create only), state JSON, default ttl ms ('0' = none),
--       expiry-record grace ms, nonce (unique to this save call)
-- Returns {1, new version} when saved, {0, stored version or ''} on a conflict.
-- Every save records its nonce as `last_nonce`: a request re-sent after its reply was lost finds
-- the stored version one past the expected one with its own nonce, so its save was applied and
-- it gets the same reply instead of a conflict.
local key, exp = KEYS[1], KEYS[2]
local expected, state, nonce = ARGV[1], ARGV[2], ARGV[5]
local cur = redis.call('HMGET', key, 'version', 'ttl_ms', 'last_nonce')
local stored = stored_int(cur[1], 'the session version')
local base = 0
if expected ~= '' then base = tonumber(expected) end
if stored and stored == base + 1 and cur[3] == nonce then return {1, stored} end
local ttl
local version
if expected == '' then
  if stored then return {0, cur[1]} end
  ttl = ARGV[3]
  redis.call('HSET', key, 'version', '1', 'state', state, 'ttl_ms', ttl, 'last_nonce', nonce)
  version = 1
else
  if stored ~= base then return {0, cur[1] or ''} end
  ttl = cur[2] or '0'
  redis.call('HSET', key, 'state', state, 'last_nonce', nonce)
  version = redis.call('HINCRBY', key, 'version', 1)
end
if ttl ~= '0' then
  redis.call('PEXPIRE', key, ttl)
  expiry_record(exp, ttl, ARGV[4])
elseif expected == '' then
  redis.call('DEL', exp)
end
return {1, version}
