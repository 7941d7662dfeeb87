-- Deletes a session.
-- KEYS: session, sexp, ack
-- ARGV: nonce (unique to this call)
-- Returns 1 when it existed (a re-sent call: when it existed for the applied one), else 0.
local ack, nonce = KEYS[3], ARGV[1]
local again = replayed(ack, nonce)
if again then return again end
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
if n > 0 then acknowledge(ack, nonce, n) end
return n
