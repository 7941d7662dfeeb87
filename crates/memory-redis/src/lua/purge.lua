-- Deletes the expiry record of a thread or session whose data has expired.
-- KEYS: the data key that exists while the thread or session lives (meta or session), the
--       expiry record
-- Returns 1 when the data had expired (and the record is now deleted), else 0.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
return redis.call('DEL', KEYS[2])
