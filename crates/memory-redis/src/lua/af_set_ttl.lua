-- Sets or removes the expiry of one of Agent Framework's history lists.
--
-- KEYS[1]  the list
-- ARGV[1]  TTL in milliseconds ('0': none, PERSIST)
--
-- Returns 1, or 0 when the list does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
expire_all({ KEYS[1] }, ARGV[1])
return 1
