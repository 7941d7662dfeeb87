-- Records the store's vector dimension if none is recorded yet, and returns the recorded one.
-- KEYS: the dimension key (`{prefix}:{|vectors}:vdims`)
-- ARGV: the dimension of the batch being upserted
-- Returns the recorded dimension: ARGV[1] when this call recorded it.
local found = redis.call('GET', KEYS[1])
if not found then
  redis.call('SET', KEYS[1], ARGV[1])
  return tonumber(ARGV[1])
end
return required_int(found, 'the vector dimension')
