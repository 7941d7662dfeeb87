-- Counts or removes every point of some scopes of one user: VectorStore::clear (one scope),
-- count_matching and delete_matching (the user's scopes a filter selects).
-- KEYS: the user's scope set (vscopes), the acknowledgement of this call's kind (vack:<scope
--       key> for a clear, vack for delete_matching), then per scope: its vectors hash, its
--       payloads hash
-- ARGV: 'count' or 'delete', nonce (unique to this call), then the scope keys (one per pair
--       of KEYS)
-- Returns { how many points the scopes held (a re-sent delete: how many the applied one
-- removed), 1 when the user holds no point now, else 0 }.
local scopes, ack, mode, nonce = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local delete = mode == 'delete'
local function emptied()
  return 1 - redis.call('EXISTS', scopes)
end
if delete then
  local again = replayed(ack, nonce)
  if again then return {again, emptied()} end
end
local n = 0
for k = 1, #ARGV - 2 do
  local vectors, payloads = KEYS[1 + 2 * k], KEYS[2 + 2 * k]
  n = n + redis.call('HLEN', vectors)
  if delete then
    redis.call('UNLINK', vectors, payloads)
    redis.call('SREM', scopes, ARGV[2 + k])
  end
end
if delete and n > 0 then acknowledge(ack, nonce, n) end
return {n, emptied()}
