-- Deletes a session, keeping its last version in `sver` (see save_session.lua).
-- KEYS: session, sexp, ack, sver
-- ARGV: nonce (unique to this call)
-- Returns 1 when it existed (a re-sent call: when it existed for the applied one), else 0.
local ack, nonce, sver = KEYS[3], ARGV[1], KEYS[4]
local again = replayed(ack, nonce)
if again then return again end
-- A session saved before `sver` existed has none yet: keep its version now. A version damaged
-- by another program is not kept, but never stops the delete (a corrupt session must remain
-- deletable).
local version = lenient_int(redis.call('HGET', KEYS[1], 'version'))
local last = lenient_int(redis.call('GET', sver))
if version and (not last or last < version) then redis.call('SET', sver, itos(version)) end
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
if n > 0 then acknowledge(ack, nonce, n) end
return n
