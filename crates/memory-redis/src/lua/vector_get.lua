-- Reads points of one scope by id: vectors and payloads in one snapshot.
-- KEYS: the scope's vectors hash, the scope's payloads hash
-- ARGV: the ids
-- Returns the vector of each id (nil where absent), then the payload of each id.
local out = chunked('HMGET', KEYS[1], ARGV, true)
local payloads = chunked('HMGET', KEYS[2], ARGV, true)
for i = 1, #payloads do out[#out + 1] = payloads[i] end
return out
