-- Appends a batch to a thread, atomically.
-- KEYS: meta, ids, msg, tok, active, exp
-- ARGV: max_messages ('0' = no limit), overflow ('archive' | 'delete'), default ttl ms ('0' =
--       none, used when the thread is new), expiry-record grace ms, a fresh epoch (a random
--       non-zero u64 in decimal: the thread's meta 'epoch' when this append creates the thread or
--       moves messages out of its active window), then one (id, tokens, json) triple per
--       distinct message.
-- Returns {flags, inserted, seq of message 1, seq of message 2, ...}: flags + 1 while the
-- thread is not confirmed in its tenant's thread index (it is new, or the store did not get to
-- add it yet): the store adds it, then deletes meta 'unindexed'; flags + 2 when this append
-- wrote the thread's expiry record where there was none: the store adds the thread to the
-- expiry index.
-- Ids already stored are skipped, so a re-sent (or retried) append stores nothing twice.
local meta, ids, msg, tok, active, exp = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local max = tonumber(ARGV[1])
local delete = ARGV[2] == 'delete'
local grace = ARGV[4]
local fresh_epoch = ARGV[5]
local FIRST = 6
local n = (#ARGV - FIRST + 1) / 3

local m = redis.call('HMGET', meta, 'last_seq', 'ttl_ms', 'gone', 'unindexed')
local is_new = not m[1]
local last = stored_int(m[1], 'last_seq') or 0
local ttl = m[2] or '0'
if is_new then
  ttl = ARGV[3]
  -- No meta: the thread is new, cleared or expired. Start from nothing (keys written in one
  -- script expire together, but drop any leftover so an old id can never resurface).
  redis.call('UNLINK', ids, msg, tok, active)
elseif last > 0 and redis.call('EXISTS', ids) == 0 then
  -- Without its id index a retried append would be stored twice: refuse rather than duplicate.
  corrupt('thread ' .. meta .. ' holds ' .. itos(last) .. ' seqs but its id index is missing')
end

local wanted = {}
for i = 1, n do wanted[i] = ARGV[FIRST + 3 * (i - 1)] end
local known = chunked('HMGET', ids, wanted, true)

local out = {0, 0}
local id_pairs, msg_pairs, tok_pairs, zadd_args = {}, {}, {}, {}
local added, added_tokens = 0, 0
for i = 1, n do
  local seq = stored_int(known[i], 'the seq of message id ' .. wanted[i])
  if not seq then
    local at = FIRST + 3 * (i - 1)
    last = last + 1
    seq = last
    local s = itos(seq)
    id_pairs[#id_pairs + 1] = ARGV[at]
    id_pairs[#id_pairs + 1] = s
    tok_pairs[#tok_pairs + 1] = s
    tok_pairs[#tok_pairs + 1] = ARGV[at + 1]
    msg_pairs[#msg_pairs + 1] = s
    msg_pairs[#msg_pairs + 1] = ARGV[at + 2]
    zadd_args[#zadd_args + 1] = s
    zadd_args[#zadd_args + 1] = s
    added = added + 1
    added_tokens = added_tokens + tonumber(ARGV[at + 1])
  end
  out[i + 2] = seq
end
out[2] = added
if is_new or m[4] then out[1] = 1 end

local batch_first = last - added + 1

if added > 0 then
  -- The ids the previous append stored and deleted at once (see below) are forgotten now: only
  -- a retry of the last append needs them, and this append is a new one.
  if m[3] and m[3] ~= '' then
    local gone = {}
    for id in string.gmatch(m[3], '%S+') do gone[#gone + 1] = id end
    chunked('HDEL', ids, gone)
    redis.call('HDEL', meta, 'gone')
  end
  chunked('HSET', ids, id_pairs)
  chunked('HSET', msg, msg_pairs)
  chunked('HSET', tok, tok_pairs)
  chunked('ZADD', active, zadd_args)
  if is_new then
    -- `born` marks this life of the thread, so a read in pages sees a clear between two pages;
    -- `epoch` is its shape for cursor reads (read_since.lua), fresh for every life.
    local now = redis.call('TIME')
    redis.call('HSET', meta, 'last_seq', itos(last), 'active', '0', 'tokens', '0',
      'deleted', '0', 'first_kept', '1', 'ttl_ms', ttl, 'born', now[1] .. '.' .. now[2],
      'epoch', fresh_epoch, 'unindexed', '1')
  else
    redis.call('HSET', meta, 'last_seq', itos(last))
  end
  local count = redis.call('HINCRBY', meta, 'active', added)
  redis.call('HINCRBY', meta, 'tokens', itos(added_tokens))
  if max > 0 and count > max then
    local excess = count - max
    local old = redis.call('ZRANGE', active, 0, excess - 1)
    local old_tokens = chunked('HMGET', tok, old, true)
    local sum = 0
    -- Past the first write: a corrupt count cannot stop the script any more, it counts as 0.
    for i = 1, #old_tokens do sum = sum + (tonumber(old_tokens[i]) or 0) end
    redis.call('ZREMRANGEBYRANK', active, 0, excess - 1)
    redis.call('HINCRBY', meta, 'active', -#old)
    redis.call('HINCRBY', meta, 'tokens', itos(-sum))
    -- The window lost messages: a cursor reader must read it whole again.
    if #old > 0 then redis.call('HSET', meta, 'epoch', fresh_epoch) end
    if delete then
      -- A deleted message's id goes too, so the id index never outgrows the stored messages;
      -- except the ids of this batch's own messages, which stay until the next append (listed
      -- in meta 'gone'), so a re-sent or retried append of this batch stores nothing.
      local bodies = chunked('HMGET', msg, old, true)
      local forget, keep = {}, {}
      for i = 1, #old do
        local seq = tonumber(old[i])
        if seq >= batch_first then
          keep[#keep + 1] = id_pairs[2 * (seq - batch_first) + 1]
        elseif bodies[i] then
          forget[#forget + 1] = message_id(bodies[i])
        end
      end
      chunked('HDEL', ids, forget)
      if #keep > 0 then redis.call('HSET', meta, 'gone', table.concat(keep, ' ')) end
      chunked('HDEL', msg, old)
      chunked('HDEL', tok, old)
      redis.call('HINCRBY', meta, 'deleted', #old)
      -- Every body below `first_kept` is deleted, so an Everything read starts there. It only
      -- moves up, past each deleted seq once over the thread's life.
      local first = tonumber(redis.call('HGET', meta, 'first_kept')) or 1
      local moved = first
      while moved <= last and redis.call('HEXISTS', msg, itos(moved)) == 0 do
        moved = moved + 1
      end
      if moved ~= first then redis.call('HSET', meta, 'first_kept', itos(moved)) end
    end
  end
end

if ttl ~= '0' then
  expire_all({meta, ids, msg, tok, active}, ttl)
  -- A new expiry record: the store adds the thread to the expiry index too.
  if redis.call('EXISTS', exp) == 0 then out[1] = out[1] + 2 end
  expiry_record(exp, ttl, grace)
elseif is_new then
  -- A thread created again after it expired has no TTL now: its old record no longer applies.
  redis.call('DEL', exp)
end
return out
