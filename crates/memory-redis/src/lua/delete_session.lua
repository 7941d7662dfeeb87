-- Deletes a session, keeping its last version in `sver` (see save_session.lua).
-- KEYS: session, sexp, ack, sver
-- ARGV: nonce (unique to this call)
-- Returns 1 when it existed (a re-sent call: when it existed for the applied one), else 0.
local ack, nonce, sver = KEYS[3], ARGV[1], KEYS[4]
local again = replayed(ack, nonce)
if again then return again end
-- A session saved before `sver` existed has none yet: keep its version now.
local version = stored_int(redis.call('HGET', KEYS[1], 'version'), 'the session version')
local last = stored_int(redis.call('GET', sver), 'the last session version')
if version and (not last or last < version) then redis.call('SET', sver, itos(version)) end
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
if n > 0 then acknowledge(ack, nonce, n) end
return n
