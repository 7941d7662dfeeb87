-- Deletes a thread.
-- KEYS: meta, ids, msg, tok, active, exp
-- Returns how many stored messages it deleted.
local m = redis.call('HMGET', KEYS[1], 'last_seq', 'deleted')
local n = (tonumber(m[1]) or 0) - (tonumber(m[2]) or 0)
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return n
