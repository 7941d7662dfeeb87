-- memory-redis: helpers shared by every script (prepended to each).
-- Lua's unpack() is limited to a few thousand values, so commands with many arguments are sent
-- in chunks of CHUNK arguments (an even number, so field/value pairs are never split).
local CHUNK = 512
-- How long the reply of an archive, clear or session delete is kept for a re-sent request (see
-- `replayed`): far longer than any request can be in flight.
local ACK_MS = 300000

-- Calls `cmd key <items...>` in chunks; when `collect`, returns the concatenated replies.
local function chunked(cmd, key, items, collect)
  local out = {}
  local n = #items
  local i = 1
  while i <= n do
    local j = math.min(i + CHUNK - 1, n)
    local reply = redis.call(cmd, key, unpack(items, i, j))
    if collect then
      for k = 1, #reply do out[#out + 1] = reply[k] end
    end
    i = j + 1
  end
  return out
end

-- Appends to `out`, for each of `seqs` whose body the hash `msg` holds: the seq as a number,
-- its token count (`counts[i]`, or from the hash `tok` when `counts` is nil), 1 when it is
-- active (every message is when `active_set` is nil) or 0, and the body. Returns `out`.
local function append_messages(out, msg, tok, seqs, counts, active_set)
  if #seqs == 0 then return out end
  local bodies = chunked('HMGET', msg, seqs, true)
  if not counts then counts = chunked('HMGET', tok, seqs, true) end
  for i = 1, #seqs do
    local body = bodies[i]
    if body then
      local is_active = 1
      if active_set and not active_set[seqs[i]] then is_active = 0 end
      out[#out + 1] = tonumber(seqs[i])
      out[#out + 1] = counts[i]
      out[#out + 1] = is_active
      out[#out + 1] = body
    end
  end
  return out
end

-- An integer as a decimal string (exact up to 2^53; Lua's tostring switches to exponents).
local function itos(x)
  return string.format('%d', x)
end

-- Stops the script with an AMCORRUPT error, which the store reports as ErrorKind::Serialization:
-- stored data that does not have the shape these scripts write (edited by hand, or partly
-- evicted by a server that does not run with `maxmemory-policy noeviction`). Scripts are not
-- rolled back on an error, so every caller checks before its first write.
local function corrupt(detail)
  error({err = 'AMCORRUPT ' .. detail})
end

-- A stored integer (a string of digits or a number), nil when absent (false); anything else is
-- corrupt data.
local function stored_int(value, what)
  if not value then return nil end
  if type(value) == 'number' or string.match(value, '^%-?%d+$') then
    return tonumber(value)
  end
  corrupt(what .. ' is not an integer: ' .. string.sub(tostring(value), 1, 40))
end

-- As stored_int, but a value that is not an integer reads as absent (nil) instead of raising:
-- for numbers a call only uses to do better (a tombstone's version), never to decide what to keep.
local function lenient_int(value)
  if type(value) == 'number' then return value end
  if value and string.match(value, '^%-?%d+$') then return tonumber(value) end
  return nil
end

-- As stored_int, but absent is corrupt too.
local function required_int(value, what)
  local n = stored_int(value, what)
  if not n then corrupt(what .. ' is missing') end
  return n
end

-- Sets (ttl ~= '0') or removes (ttl == '0') the expiry of every key in `keys`.
local function expire_all(keys, ttl)
  for i = 1, #keys do
    if ttl == '0' then
      redis.call('PERSIST', keys[i])
    else
      redis.call('PEXPIRE', keys[i], ttl)
    end
  end
end

-- Writes (ttl ~= '0') or deletes (ttl == '0') the expiry record `key`: it outlives the data by
-- `grace` ms, so purge_expired can find and count what expired.
local function expiry_record(key, ttl, grace)
  if ttl == '0' then
    redis.call('DEL', key)
  else
    redis.call('SET', key, '1', 'PX', itos(tonumber(ttl) + tonumber(grace)))
  end
end

-- The reply the request `nonce` got when it was applied, if the acknowledgement `key` still
-- records it, else nil. A cluster client re-sends a request whose reply was lost; the re-sent
-- request must get the reply of the applied one, not a report that there was nothing to do.
local function replayed(key, nonce)
  local ack = redis.call('GET', key)
  if ack then
    local recorded, reply = string.match(ack, '^(%S+) (%d+)$')
    if recorded == nonce then return tonumber(reply) end
  end
  return nil
end

-- Records `reply` as the reply of the request `nonce` (see `replayed`) and returns it.
local function acknowledge(key, nonce, reply)
  redis.call('SET', key, nonce .. ' ' .. itos(reply), 'PX', ACK_MS)
  return reply
end

-- The id of a stored message body (the versioned JSON, which starts with its version and id),
-- or nil when the body is not one: ids never hold a quote or a backslash.
local function message_id(body)
  local id = string.match(body, '^{"v":%d+,"id":"([^"\\]+)"')
  if id then return id end
  local ok, decoded = pcall(cjson.decode, body)
  if ok and type(decoded) == 'table' and type(decoded.id) == 'string' then return decoded.id end
  return nil
end

-- Walks the active window newest first from `upper` down to `lower` (ZREVRANGEBYSCORE bounds),
-- in growing chunks, picking messages while their stored token counts add up to at most
-- `budget`, and at most `cap` of them. Returns the picked seqs (newest first), their token
-- counts (oldest first, as a read returns them) and whether the budget stopped the walk.
local function budget_walk(active, tok, upper, lower, budget, cap)
  local left = tonumber(budget)
  local used = 0
  local newest, picked = {}, {}
  local start, step = 0, 16
  local stopped = false
  while not stopped and #newest < cap do
    local want = math.min(step, cap - #newest)
    local batch = redis.call('ZREVRANGEBYSCORE', active, upper, lower, 'LIMIT', start, want)
    if #batch == 0 then break end
    local batch_counts = redis.call('HMGET', tok, unpack(batch))
    for i = 1, #batch do
      local t = required_int(batch_counts[i], 'the token count of message ' .. batch[i])
      if used + t > left then
        stopped = true
        break
      end
      used = used + t
      newest[#newest + 1] = batch[i]
      picked[#picked + 1] = t
    end
    if #batch < want then break end
    start = start + #batch
    if step < 512 then step = step * 2 end
  end
  local counts = {}
  for i = #picked, 1, -1 do counts[#counts + 1] = picked[i] end
  return newest, counts, stopped
end
