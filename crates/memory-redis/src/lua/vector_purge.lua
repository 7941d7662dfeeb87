-- Counts or removes every point of some scopes of one user: VectorStore::clear (one scope),
-- count_matching and delete_matching (the user's scopes a filter selects).
-- KEYS: the user's scope set (vscopes), the acknowledgement of this call's kind (vack:<scope
--       key> for a clear, vack for delete_matching), then per scope: its vectors hash, its
--       payloads hash, its compact vectors hash
-- ARGV: 'count' or 'delete', nonce (unique to this call), then the scope keys (one per three
--       KEYS)
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
  local vectors, payloads, compact = KEYS[3 * k], KEYS[1 + 3 * k], KEYS[2 + 3 * k]
  n = n + redis.call('HLEN', vectors)
  if delete then
    redis.call('UNLINK', vectors, payloads, compact)
    redis.call('SREM', scopes, ARGV[2 + k])
  end
end
if delete and n > 0 then acknowledge(ack, nonce, n) end
return {n, emptied()}
