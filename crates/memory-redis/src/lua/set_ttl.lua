-- Sets or removes the TTL of a thread or a session.
-- KEYS: the hash holding 'ttl_ms' (thread meta or session), the other data keys..., and last the
--       expiry record.
-- ARGV: ttl ms ('0' = none), expiry-record grace ms
-- Returns 1, or 0 when the thread or session does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'ttl_ms', ARGV[1])
local data = {}
for i = 1, #KEYS - 1 do data[i] = KEYS[i] end
expire_all(data, ARGV[1])
expiry_record(KEYS[#KEYS], ARGV[1], ARGV[2])
return 1
