-- Reads a range of one of Agent Framework's history lists with its length and its newest
-- element, atomically.
--
-- KEYS[1]  the list
-- ARGV[1]  start, ARGV[2] stop: LRANGE indices (negative from the end)
--
-- Returns {LLEN, newest element (false when empty), element, element, ...}.

local reply = redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[2])
table.insert(reply, 1, redis.call('LINDEX', KEYS[1], -1))
table.insert(reply, 1, redis.call('LLEN', KEYS[1]))
return reply
