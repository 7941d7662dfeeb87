-- A cursor read (HistoryStore::read_since) in one call: the thread's epoch and counts, and the
-- messages of a window, all of them or only those after the reader's cursor.
-- KEYS: meta, msg, tok, active
-- ARGV: mode, since_epoch, since_seq, floor, count, budget, page, fresh_epoch
--   mode         'forward' (Window::All / After), 'everything' (Window::Everything) or
--                'backward' (Window::Last / TokenBudget), as in read.lua.
--   since_epoch  the cursor's epoch in decimal ('' without a cursor); since_seq its seq ('0').
--   floor        forward: the window's own lower bound (After(floor)); '0' otherwise.
--   count        backward: at most this many messages ('' = no limit).
--   budget       backward: only as long as the token counts add up to at most this ('' = none).
--   page         MAX_READ_PAGE: the most messages one call returns.
--   fresh_epoch  a random non-zero u64 in decimal: written as the thread's epoch when its meta
--                has none (a thread written by a build before epochs) or one that is not a u64.
-- The cursor is current when since_epoch is the thread's epoch and since_seq is not past
-- last_seq; then only the window's messages with seq > since_seq are selected (a backward walk
-- stops at since_seq), else the whole window.
-- Returns {state, epoch, last_seq, active, tokens, deleted, born, then seq, tokens, active (1/0),
-- json for each message in seq order}: state is 'appended' (the cursor is current), 'whole', or
-- 'paged' when the answer would hold more than `page` messages (no messages then: the store
-- reads them with read.lua, in pages, bounded by this header). epoch is '0' for a thread that
-- holds nothing (NO_EPOCH); born as in read.lua ('' for none).
local meta, msg, tok, active = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local mode, since_epoch, since_seq, floor = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local count, budget, page, fresh_epoch = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]

local m = redis.call('HMGET', meta, 'last_seq', 'active', 'tokens', 'deleted', 'first_kept',
  'born', 'epoch')
if not m[1] then
  -- No thread (never written, cleared or expired): NO_EPOCH, and nothing to read.
  local state = 'whole'
  if since_epoch == '0' then state = 'appended' end
  return {state, '0', '0', '0', '0', '0', ''}
end
local last = required_int(m[1], 'last_seq')

-- A u64 in canonical decimal, not 0.
local function is_epoch(e)
  if not e or not string.match(e, '^[1-9]%d*$') then return false end
  return #e < 20 or (#e == 20 and e <= '18446744073709551615')
end
local epoch = m[7]
if not is_epoch(epoch) then
  -- Written lazily, once, for a thread an older build created: from now on it only changes as
  -- the writers change it.
  epoch = fresh_epoch
  redis.call('HSET', meta, 'epoch', epoch)
end

local current = since_epoch == epoch and tonumber(since_seq) <= last
local after = '0'
local state = 'whole'
if current then
  after = since_seq
  state = 'appended'
end
local header = {state, epoch, m[1], m[2] or '0', m[3] or '0', m[4] or '0', m[6] or ''}
local function paged()
  header[1] = 'paged'
  return header
end

local seqs
local counts = nil
local active_set = nil
if mode == 'forward' then
  local lower = floor
  if tonumber(after) > tonumber(floor) then lower = after end
  seqs = redis.call('ZRANGEBYSCORE', active, '(' .. lower, '+inf', 'LIMIT', 0, page + 1)
  if #seqs > page then return paged() end
elseif mode == 'everything' then
  -- As read.lua: the stored seqs lie in first_kept..last_seq.
  local first = stored_int(m[5], 'first_kept') or 1
  local from = math.max(tonumber(after) + 1, first)
  if last - from + 1 > page then return paged() end
  seqs = {}
  if from <= last then
    for s = from, last do seqs[#seqs + 1] = itos(s) end
    active_set = {}
    local members = redis.call('ZRANGEBYSCORE', active, itos(from), itos(last))
    for i = 1, #members do active_set[members[i]] = true end
  end
elseif mode == 'backward' then
  local lower = '(' .. after
  local newest = {}
  if budget == '' then
    local want = page + 1
    if count ~= '' then want = math.min(tonumber(count), page + 1) end
    if want > 0 then
      newest = redis.call('ZREVRANGEBYSCORE', active, '+inf', lower, 'LIMIT', 0, want)
    end
    if #newest > page then return paged() end
  else
    -- As read.lua: newest first until the budget is passed (or one more message than a page
    -- fits: then the store reads in pages).
    newest, counts = budget_walk(active, tok, '+inf', lower, budget, page + 1)
    if #newest > page then return paged() end
  end
  seqs = {}
  for i = #newest, 1, -1 do seqs[#seqs + 1] = newest[i] end
else
  return redis.error_reply('ERR memory-redis: unknown read mode ' .. mode)
end

return append_messages(header, msg, tok, seqs, counts, active_set)
