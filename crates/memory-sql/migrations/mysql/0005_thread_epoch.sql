-- Schema v5: each thread row holds its epoch, the number a cursor read (`read_since`) compares
-- to tell "only appended since" from "changed otherwise". A new row draws a fresh value (60
-- bits of the MD5 of a UUID, never 0) from the column's default, as does every existing row
-- here; an archive that moves a message and an append that restarts an expired thread set a
-- new one.
ALTER TABLE {prefix}threads ADD COLUMN epoch BIGINT NOT NULL
    DEFAULT (CAST(CONV(LEFT(MD5(UUID()), 15), 16, 10) AS UNSIGNED) + 1);
