-- Deletes one of Agent Framework's history lists.
--
-- KEYS[1]  the list
--
-- Returns how many elements it held.
local n = redis.call('LLEN', KEYS[1])
redis.call('DEL', KEYS[1])
return n
