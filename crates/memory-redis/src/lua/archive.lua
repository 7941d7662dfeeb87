-- Archives the active messages whose seqs are in [first, last].
-- KEYS: meta, tok, active, ack
-- ARGV: first, last, nonce (unique to this call), a fresh epoch (a random non-zero u64 in
--       decimal: the thread's meta 'epoch' once this call moved a message)
-- Returns how many messages it moved (a re-sent call: how many the applied one moved).
local meta, tok, active, ack = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local nonce = ARGV[3]
local again = replayed(ack, nonce)
if again then return again end
local seqs = redis.call('ZRANGEBYSCORE', active, ARGV[1], ARGV[2])
if #seqs == 0 then return 0 end
local counts = chunked('HMGET', tok, seqs, true)
local sum = 0
for i = 1, #counts do
  sum = sum + required_int(counts[i], 'the token count of message ' .. seqs[i])
end
redis.call('ZREMRANGEBYSCORE', active, ARGV[1], ARGV[2])
redis.call('HINCRBY', meta, 'active', -#seqs)
redis.call('HINCRBY', meta, 'tokens', itos(-sum))
-- The window lost messages: a cursor reader must read it whole again.
redis.call('HSET', meta, 'epoch', ARGV[4])
return acknowledge(ack, nonce, #seqs)
