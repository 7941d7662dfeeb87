-- Inserts or replaces points of one scope (VectorStore::upsert): all of them, in one step.
-- KEYS: the user's scope set (vscopes), the scope's vectors hash, the scope's payloads hash,
--       the scope's compact vectors hash
-- ARGV: the scope key, then per point: its id, its vector (f32 little-endian bytes), its
--       payload (JSON), its compact vector (memory_core::vector::quantized)
-- Returns 1 when the user held no point before this call, else 0.
-- Writing the same points again changes nothing (a re-sent call is harmless).
local scopes, vectors, payloads, compact = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local created = 0
if redis.call('EXISTS', scopes) == 0 then created = 1 end
local vs, ps, cs = {}, {}, {}
for i = 2, #ARGV, 4 do
  vs[#vs + 1] = ARGV[i]
  vs[#vs + 1] = ARGV[i + 1]
  ps[#ps + 1] = ARGV[i]
  ps[#ps + 1] = ARGV[i + 2]
  cs[#cs + 1] = ARGV[i]
  cs[#cs + 1] = ARGV[i + 3]
end
chunked('HSET', vectors, vs, false)
chunked('HSET', payloads, ps, false)
chunked('HSET', compact, cs, false)
redis.call('SADD', scopes, ARGV[1])
return created
