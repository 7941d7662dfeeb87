-- Archives the active messages whose seqs are in [first, last].
-- KEYS: meta, tok, active
-- ARGV: first, last
-- Returns how many messages it moved.
local meta, tok, active = KEYS[1], KEYS[2], KEYS[3]
local seqs = redis.call('ZRANGEBYSCORE', active, ARGV[1], ARGV[2])
if #seqs == 0 then return 0 end
local counts = chunked('HMGET', tok, seqs, true)
local sum = 0
for i = 1, #counts do sum = sum + (tonumber(counts[i]) or 0) end
redis.call('ZREMRANGEBYSCORE', active, ARGV[1], ARGV[2])
redis.call('HINCRBY', meta, 'active', -#seqs)
redis.call('HINCRBY', meta, 'tokens', itos(-sum))
return #seqs
