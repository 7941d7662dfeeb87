-- Schema v5: each thread row holds its epoch, the number a cursor read (`read_since`) compares
-- to tell "only appended since" from "changed otherwise". A new row draws a fresh random value
-- (52 random bits, never 0) from the column's default, as does every existing row here; an
-- archive that moves a message and an append that restarts an expired thread set a new one.
ALTER TABLE {prefix}threads ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL
    DEFAULT (floor(random() * 4503599627370496)::bigint + 1);
