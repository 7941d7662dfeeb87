-- memory-redis: helpers shared by every script (prepended to each).
-- Lua's unpack() is limited to a few thousand values, so commands with many arguments are sent
-- in chunks of CHUNK arguments (an even number, so field/value pairs are never split).
local CHUNK = 512

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

-- An integer as a decimal string (exact up to 2^53; Lua's tostring switches to exponents).
local function itos(x)
  return string.format('%d', x)
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
