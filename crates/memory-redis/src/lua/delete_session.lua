-- Deletes a session.
-- KEYS: session, sexp
-- Returns 1 when it existed, else 0.
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
return n
