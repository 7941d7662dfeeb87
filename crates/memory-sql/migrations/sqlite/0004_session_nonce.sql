-- Schema v4: each session row records the nonce of the save that wrote it last, so a save
-- re-sent after its reply was lost finds its own write and returns its version instead of a
-- conflict. Deleted and expired sessions now stay as tombstones (state '' and expires_at 0)
-- that keep their last version, so a re-created session continues above it; rows need no
-- change for that.
ALTER TABLE {prefix}sessions ADD COLUMN last_nonce TEXT;
