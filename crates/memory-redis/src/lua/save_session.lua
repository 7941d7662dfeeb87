-- Saves a session state if its stored version is the expected one.
-- KEYS: session, sexp, sver
-- ARGV: expected version ('' = create only), state JSON, default ttl ms ('0' = none),
--       expiry-record grace ms, nonce (unique to this save call)
-- Returns {1, new version} when saved, {0, stored version or ''} on a conflict.
-- Every save records its nonce as `last_nonce`: a request re-sent after its reply was lost finds
-- its own nonce on the session (at one past the expected version, for an update), so its save
-- was applied and it gets the same reply instead of a conflict.
-- Every save also writes the new version to `sver`, which has no TTL and outlives a delete or
-- an expiry: a session created again starts one past it, so versions never repeat for a scope.
local key, exp, sver = KEYS[1], KEYS[2], KEYS[3]
local expected, state, nonce = ARGV[1], ARGV[2], ARGV[5]
local cur = redis.call('HMGET', key, 'version', 'ttl_ms', 'last_nonce')
local stored = stored_int(cur[1], 'the session version')
local ttl
local version
if expected == '' then
  if stored then
    if cur[3] == nonce then return {1, stored} end
    return {0, cur[1]}
  end
  -- A tombstone damaged by another program counts as none: the session can still be created.
  local last = lenient_int(redis.call('GET', sver)) or 0
  version = last + 1
  ttl = ARGV[3]
  redis.call('HSET', key, 'version', itos(version), 'state', state, 'ttl_ms', ttl,
    'last_nonce', nonce)
else
  local base = tonumber(expected)
  if stored and stored == base + 1 and cur[3] == nonce then return {1, stored} end
  if stored ~= base then return {0, cur[1] or ''} end
  ttl = cur[2] or '0'
  redis.call('HSET', key, 'state', state, 'last_nonce', nonce)
  version = redis.call('HINCRBY', key, 'version', 1)
end
redis.call('SET', sver, itos(version))
if ttl ~= '0' then
  redis.call('PEXPIRE', key, ttl)
  expiry_record(exp, ttl, ARGV[4])
elseif expected == '' then
  redis.call('DEL', exp)
end
return {1, version}
