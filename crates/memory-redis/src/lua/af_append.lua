-- Appends a batch to one of Agent Framework's history lists (RedisHistoryProvider's layout),
-- deduplicated as its `filter_new_messages` does, atomically.
--
-- KEYS[1]  the list
-- ARGV[1]  max_messages (0: no limit)
-- ARGV[2]  TTL in milliseconds (0: none)
-- ARGV[3]  m, the number of incoming messages; then 4 arguments per message:
--          kind ("i": identified by a string message_id, "j": by a message_id of another JSON
--          type, "c": by role and contents),
--          the message_id (kind "i"), its JSON text (kind "j") or the role (kind "c"),
--          the contents as json.dumps writes them (kind "c"; "" otherwise),
--          the element to push.
--
-- Identities are Agent Framework's `get_message_identity`: ("id", message_id) when the message
-- has a message_id that is not null (even ""), else ("content", role, contents).
--
-- Only LLEN and the last m elements are read: the whole-list rule (a full-transcript replay)
-- can only match a list no longer than the batch, which is then read whole, and the overlap
-- rule compares at most m elements.
--
-- Returns {base, skip, trimmed}: the incoming message i (1-based) is, or matched, the list
-- position base + i - 1 before the trim; the first `skip` incoming messages were duplicates;
-- `trimmed` elements were cut from the front by max_messages.

local key = KEYS[1]
local max = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local m = tonumber(ARGV[3])

-- JSON scanning over a valid document: index just past the string opening at i.
local function skip_string(s, i)
  local j = i + 1
  while true do
    local k = string.find(s, '["\\]', j)
    if not k then return nil end
    if string.sub(s, k, k) == '"' then return k + 1 end
    j = k + 2
  end
end

local function skip_ws(s, i)
  return string.find(s, '[^ \t\n\r]', i) or (#s + 1)
end

-- Index just past the value starting at i.
local function skip_value(s, i)
  local c = string.sub(s, i, i)
  if c == '"' then return skip_string(s, i) end
  if c == '{' or c == '[' then
    local depth = 0
    local j = i
    while true do
      local k = string.find(s, '[][{}"]', j)
      if not k then return nil end
      local d = string.sub(s, k, k)
      if d == '"' then
        j = skip_string(s, k)
        if not j then return nil end
      else
        if d == '{' or d == '[' then depth = depth + 1 else depth = depth - 1 end
        j = k + 1
        if depth == 0 then return j end
      end
    end
  end
  return string.find(s, '[,}%]%s]', i) or (#s + 1)
end

-- The exact text of the top-level member `name` of the object `s`, or nil.
local function raw_member(s, name)
  local i = skip_ws(s, 1)
  if string.sub(s, i, i) ~= '{' then return nil end
  i = skip_ws(s, i + 1)
  while string.sub(s, i, i) == '"' do
    local key_end = skip_string(s, i)
    if not key_end then return nil end
    local member = string.sub(s, i + 1, key_end - 2)
    i = skip_ws(s, key_end)
    if string.sub(s, i, i) ~= ':' then return nil end
    i = skip_ws(s, i + 1)
    local value_end = skip_value(s, i)
    if not value_end then return nil end
    if member == name then return string.sub(s, i, value_end - 1) end
    i = skip_ws(s, value_end)
    if string.sub(s, i, i) ~= ',' then return nil end
    i = skip_ws(s, i + 1)
  end
  return nil
end

local function content_identity(role, contents)
  return 'c' .. #role .. ':' .. role .. contents
end

-- The identity of a stored element, and whether it is an id-less user message.
local function identity_of(element, position)
  local ok, message = pcall(cjson.decode, element)
  if not ok or type(message) ~= 'table' then
    corrupt('list element ' .. position .. ' is not a JSON object')
  end
  local id = message['message_id']
  if type(id) == 'string' then
    return 'i' .. id, false
  end
  if id ~= nil and id ~= cjson.null then
    return 'j' .. (raw_member(element, 'message_id') or '\0unmatched'), false
  end
  local role = message['role']
  if type(role) ~= 'string' then role = '' end
  local contents
  if message['contents'] == nil then
    contents = '[]'
  else
    -- Compared as written. An escaped member name makes the element unmatched (kept).
    contents = raw_member(element, 'contents') or '\0unmatched'
  end
  return content_identity(role, contents), role == 'user'
end

local incoming, incoming_user, elements = {}, {}, {}
for i = 1, m do
  local at = 3 + (i - 1) * 4
  local kind, first, second = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  if kind == 'i' or kind == 'j' then
    incoming[i] = kind .. first
    incoming_user[i] = false
  else
    incoming[i] = content_identity(first, second)
    incoming_user[i] = first == 'user'
  end
  elements[i] = ARGV[at + 4]
end

local len = redis.call('LLEN', key)
local existing, existing_user = {}, {}
if len > 0 then
  local tail = redis.call('LRANGE', key, -m, -1)
  local first_position = len - #tail + 1
  for i, element in ipairs(tail) do
    existing[i], existing_user[i] = identity_of(element, first_position + i - 1)
  end
end
local n = #existing

local function same(from_existing, from_incoming, count)
  for j = 0, count - 1 do
    if existing[from_existing + j] ~= incoming[from_incoming + j] then return false end
  end
  return true
end

local skip, base = 0, len + 1
local found = false
-- 1. The whole list inside the batch (a full-transcript replay): what follows its first
--    occurrence is new; but a list of a single id-less user message found at the very start
--    is a repeated input, left to rule 2.
if n > 0 and len <= m then
  for start = 0, m - n do
    if same(1, start + 1, n) then
      if not (start == 0 and n == 1 and existing_user[1]) then
        skip, base, found = start + n, 1 - start, true
      end
      break
    end
  end
end
-- 2. The longest suffix of the list that is a prefix of the batch, unless that overlap is a
--    single id-less user message.
if not found then
  for k = math.min(n, m), 1, -1 do
    if same(n - k + 1, 1, k) then
      if not (k == 1 and incoming_user[1]) then
        skip, base = k, len - k + 1
      end
      break
    end
  end
end

local pushed = m - skip
local trimmed = 0
if pushed > 0 then
  local new = {}
  for i = skip + 1, m do new[#new + 1] = elements[i] end
  chunked('RPUSH', key, new, false)
  local total = len + pushed
  if max > 0 and total > max then
    redis.call('LTRIM', key, -max, -1)
    trimmed = total - max
  end
end
if ttl > 0 and len + pushed > 0 then
  redis.call('PEXPIRE', key, ttl)
end
return { base, skip, trimmed }
