-- Deletes a thread. Lenient with corrupt counters: clearing is how a damaged thread is removed.
-- KEYS: meta, ids, msg, tok, active, exp, ack
-- ARGV: nonce (unique to this call)
-- Returns how many stored messages it deleted (a re-sent call: how many the applied one did).
local ack, nonce = KEYS[7], ARGV[1]
local again = replayed(ack, nonce)
if again then return again end
local m = redis.call('HMGET', KEYS[1], 'last_seq', 'deleted')
local n = math.max((tonumber(m[1]) or 0) - (tonumber(m[2]) or 0), 0)
local removed = redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
if removed > 0 then acknowledge(ack, nonce, n) end
return n
