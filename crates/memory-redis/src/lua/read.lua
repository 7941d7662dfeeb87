-- Reads one page of a window of a thread: at most `limit` messages (and, for 'everything', at
-- most `limit` seqs probed), so no call walks a long thread and blocks the server.
-- KEYS: meta, msg, tok, active
-- ARGV: mode, cursor, limit, budget
--   'forward'    the active messages with seq > cursor, oldest first (Window::All / After).
--   'everything' the stored messages, active and archived, with seq > cursor (Window::Everything).
--   'backward'   the active messages with seq < cursor ('' = no bound), newest first
--                (Window::Last / TokenBudget); when budget ~= '', only as long as their token
--                counts add up to at most budget (the window ends before the first that does
--                not fit).
--   'page'       the stored messages, active and archived, with seq > cursor: at most `limit`
--                of them, skipping the seqs whose bodies are deleted (Overflow::Delete), but
--                probing at most PAGE_PROBES seqs (HistoryStore::read_page).
-- Returns {born, next, then seq, tokens, active (1/0), json for each message of the page in seq
-- order}: born is the thread's creation mark (meta 'born', '' for none, so the caller sees a
-- thread cleared and created again between two pages); next is the cursor of the next page, or
-- '' when the window ends with this page. Token counts are as stored: the store checks them.
local meta, msg, tok, active = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local mode, cursor, limit, budget = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local seqs
local counts = nil
local active_set = nil
local next_cursor = ''
-- How many seqs one 'page' call looks at, at most: a range thinned out by Overflow::Delete
-- (deleted active messages above an archived one) may hold long runs of deleted bodies.
local PAGE_PROBES = 4000

local born = redis.call('HGET', meta, 'born') or ''

if mode == 'forward' then
  seqs = redis.call('ZRANGEBYSCORE', active, '(' .. cursor, '+inf', 'LIMIT', 0, limit + 1)
  if #seqs > limit then
    seqs[#seqs] = nil
    next_cursor = seqs[#seqs]
  end
elseif mode == 'backward' then
  local upper = '+inf'
  if cursor ~= '' then upper = '(' .. cursor end
  local newest = {}
  if budget == '' then
    newest = redis.call('ZREVRANGEBYSCORE', active, upper, '-inf', 'LIMIT', 0, limit + 1)
    if #newest > limit then
      newest[#newest] = nil
      next_cursor = newest[#newest]
    end
  else
    -- Newest first until the budget is passed or the page is full; the token counts read on
    -- the way are the ones returned. A full page whose budget is not passed goes on below it.
    local stopped
    newest, counts, stopped = budget_walk(active, tok, upper, '-inf', budget, limit)
    if not stopped and #newest >= limit then next_cursor = newest[#newest] end
  end
  seqs = {}
  for i = #newest, 1, -1 do seqs[#seqs + 1] = newest[i] end
elseif mode == 'everything' then
  -- The stored seqs lie in first_kept..last_seq (bodies below first_kept are all deleted); a
  -- page probes at most `limit` of them, so a range thinned out by Overflow::Delete may take
  -- pages that return few messages, each still short.
  local m = redis.call('HMGET', meta, 'last_seq', 'first_kept')
  local last = stored_int(m[1], 'last_seq') or 0
  local first = stored_int(m[2], 'first_kept') or 1
  local from = math.max(tonumber(cursor) + 1, first)
  local to = math.min(last, from + limit - 1)
  seqs = {}
  if from <= to then
    for s = from, to do seqs[#seqs + 1] = itos(s) end
    if to < last then next_cursor = itos(to) end
    active_set = {}
    local members = redis.call('ZRANGEBYSCORE', active, itos(from), itos(to))
    for i = 1, #members do active_set[members[i]] = true end
  end
elseif mode == 'page' then
  -- As 'everything', but a page holds up to `limit` stored messages, however many deleted
  -- seqs lie among them: it looks for stored seqs in the token counts (small values, deleted
  -- with the bodies), a first chunk of `limit` seqs, then growing chunks, at most PAGE_PROBES
  -- seqs in all, and reads the bodies of the ones it takes. next is the last seq looked at
  -- when the thread goes on past it, so a page that found only deleted seqs (or bodies that
  -- do not decode) still moves on.
  local m = redis.call('HMGET', meta, 'last_seq', 'first_kept')
  local last = stored_int(m[1], 'last_seq') or 0
  local first = stored_int(m[2], 'first_kept') or 1
  local from = math.max(tonumber(cursor) + 1, first)
  local probed = from - 1
  local step = limit
  seqs, counts = {}, {}
  while #seqs < limit and probed < last and probed - from + 1 < PAGE_PROBES do
    local to = math.min(last, probed + step, from + PAGE_PROBES - 1)
    local want = {}
    for s = probed + 1, to do want[#want + 1] = itos(s) end
    local got = chunked('HMGET', tok, want, true)
    probed = to
    for i = 1, #want do
      if got[i] then
        seqs[#seqs + 1] = want[i]
        counts[#counts + 1] = got[i]
        if #seqs == limit then
          probed = tonumber(want[i])
          break
        end
      end
    end
    if step < 1024 then step = step * 2 end
  end
  if probed < last then next_cursor = itos(probed) end
  if #seqs > 0 then
    active_set = {}
    local members = redis.call('ZRANGEBYSCORE', active, seqs[1], seqs[#seqs])
    for i = 1, #members do active_set[members[i]] = true end
  end
else
  return redis.error_reply('ERR memory-redis: unknown read mode ' .. mode)
end

return append_messages({born, next_cursor}, msg, tok, seqs, counts, active_set)
