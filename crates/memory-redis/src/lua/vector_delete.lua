-- Removes points of one scope by id (VectorStore::delete).
-- KEYS: the user's scope set (vscopes), the scope's vectors hash, the scope's payloads hash,
--       the scope's acknowledgement (vack:<scope key>), the scope's compact vectors hash
-- ARGV: nonce (unique to this call), the scope key, then the ids
-- Returns how many of the ids the scope held (a re-sent call: how many the applied one did).
local scopes, vectors, payloads, ack, compact = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local nonce = ARGV[1]
local again = replayed(ack, nonce)
if again then return again end
local n = 0
local i = 3
while i <= #ARGV do
  local j = math.min(i + CHUNK - 1, #ARGV)
  n = n + redis.call('HDEL', vectors, unpack(ARGV, i, j))
  redis.call('HDEL', payloads, unpack(ARGV, i, j))
  redis.call('HDEL', compact, unpack(ARGV, i, j))
  i = j + 1
end
-- A scope without points leaves the user's set.
if redis.call('EXISTS', vectors) == 0 then
  redis.call('DEL', payloads, compact)
  redis.call('SREM', scopes, ARGV[2])
end
if n > 0 then acknowledge(ack, nonce, n) end
return n
