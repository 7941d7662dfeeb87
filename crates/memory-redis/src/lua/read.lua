-- Reads a window of a thread.
-- KEYS: meta, msg, tok, active
-- ARGV: mode ('all' | 'last' | 'after' | 'budget' | 'everything'), then the mode's argument
--       (n for 'last', the seq for 'after', the token budget for 'budget').
-- Returns a flat array: seq, tokens, active (1/0), json for each message, in seq order.
local meta, msg, tok, active = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local mode = ARGV[1]
local seqs
local active_set = nil

if mode == 'all' then
  seqs = redis.call('ZRANGE', active, 0, -1)
elseif mode == 'last' then
  seqs = redis.call('ZRANGE', active, '-' .. ARGV[2], -1)
elseif mode == 'after' then
  seqs = redis.call('ZRANGEBYSCORE', active, '(' .. ARGV[2], '+inf')
elseif mode == 'budget' then
  -- Walk the active window newest first, in growing chunks, until the budget is passed.
  local budget = tonumber(ARGV[2])
  local used = 0
  local picked = {}
  local start = 0
  local step = 16
  local full = false
  while not full do
    local batch = redis.call('ZREVRANGE', active, start, start + step - 1)
    if #batch == 0 then break end
    local counts = redis.call('HMGET', tok, unpack(batch))
    for i = 1, #batch do
      local t = tonumber(counts[i]) or 0
      if used + t > budget then
        full = true
        break
      end
      used = used + t
      picked[#picked + 1] = batch[i]
    end
    if #batch < step then break end
    start = start + step
    if step < 512 then step = step * 2 end
  end
  seqs = {}
  for i = #picked, 1, -1 do seqs[#seqs + 1] = picked[i] end
elseif mode == 'everything' then
  local last = tonumber(redis.call('HGET', meta, 'last_seq')) or 0
  seqs = {}
  for i = 1, last do seqs[i] = itos(i) end
  active_set = {}
  local members = redis.call('ZRANGE', active, 0, -1)
  for i = 1, #members do active_set[members[i]] = true end
else
  return redis.error_reply('ERR memory-redis: unknown read mode ' .. mode)
end

local bodies = chunked('HMGET', msg, seqs, true)
local counts = chunked('HMGET', tok, seqs, true)
local out = {}
for i = 1, #seqs do
  local body = bodies[i]
  if body then
    local is_active = 1
    if active_set and not active_set[seqs[i]] then is_active = 0 end
    out[#out + 1] = tonumber(seqs[i])
    out[#out + 1] = tonumber(counts[i]) or 0
    out[#out + 1] = is_active
    out[#out + 1] = body
  end
end
return out
