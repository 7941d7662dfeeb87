-- Reads a window of a thread.
-- KEYS: meta, msg, tok, active
-- ARGV: mode ('all' | 'last' | 'after' | 'budget' | 'everything'), then the mode's argument
--       (n for 'last', the seq for 'after', the token budget for 'budget').
-- Returns a flat array: seq, tokens, active (1/0), json for each message, in seq order (the
-- token count as stored: the store checks it).
local meta, msg, tok, active = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local mode = ARGV[1]
local seqs
local counts = nil
local active_set = nil

if mode == 'all' then
  seqs = redis.call('ZRANGE', active, 0, -1)
elseif mode == 'last' then
  seqs = redis.call('ZRANGE', active, '-' .. ARGV[2], -1)
elseif mode == 'after' then
  seqs = redis.call('ZRANGEBYSCORE', active, '(' .. ARGV[2], '+inf')
elseif mode == 'budget' then
  -- Walk the active window newest first, in growing chunks, until the budget is passed; the
  -- token counts read on the way are the ones returned.
  local budget = tonumber(ARGV[2])
  local used = 0
  local picked, picked_counts = {}, {}
  local start = 0
  local step = 16
  local full = false
  while not full do
    local batch = redis.call('ZREVRANGE', active, start, start + step - 1)
    if #batch == 0 then break end
    local batch_counts = redis.call('HMGET', tok, unpack(batch))
    for i = 1, #batch do
      local t = required_int(batch_counts[i], 'the token count of message ' .. batch[i])
      if used + t > budget then
        full = true
        break
      end
      used = used + t
      picked[#picked + 1] = batch[i]
      picked_counts[#picked_counts + 1] = t
    end
    if #batch < step then break end
    start = start + step
    if step < 512 then step = step * 2 end
  end
  seqs, counts = {}, {}
  for i = #picked, 1, -1 do
    seqs[#seqs + 1] = picked[i]
    counts[#counts + 1] = picked_counts[i]
  end
elseif mode == 'everything' then
  -- The stored seqs: first_kept..last_seq (bodies below first_kept are all deleted), unless
  -- deleted seqs above an archived message make up most of that range (Overflow::Delete after
  -- an archive); then the stored seqs are listed instead, so the walk is never over more than
  -- twice the stored messages.
  local m = redis.call('HMGET', meta, 'last_seq', 'deleted', 'first_kept')
  local last = stored_int(m[1], 'last_seq') or 0
  local stored = last - (stored_int(m[2], 'deleted') or 0)
  local first = stored_int(m[3], 'first_kept') or 1
  seqs = {}
  if stored > 0 and last - first + 1 <= 2 * stored then
    for s = first, last do seqs[#seqs + 1] = itos(s) end
  elseif stored > 0 then
    local fields = redis.call('HKEYS', msg)
    local numbers = {}
    for i = 1, #fields do numbers[i] = required_int(fields[i], 'a message seq') end
    table.sort(numbers)
    for i = 1, #numbers do seqs[i] = itos(numbers[i]) end
  end
  active_set = {}
  local members = redis.call('ZRANGE', active, 0, -1)
  for i = 1, #members do active_set[members[i]] = true end
else
  return redis.error_reply('ERR memory-redis: unknown read mode ' .. mode)
end

local bodies = chunked('HMGET', msg, seqs, true)
if not counts then counts = chunked('HMGET', tok, seqs, true) end
local out = {}
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
