-- Schema v8: each vector point also keeps a compact copy of its vector (one signed byte a
-- dimension of the unit vector, after an f32 scale: `memory_core::vector::quantized`), which a
-- search scans instead of the f32 values (a quarter of the bytes) before it scores its best
-- candidates again exactly. Rows written before have none (NULL): a search reads their f32
-- values instead.
ALTER TABLE {prefix}vectors ADD COLUMN quantized BLOB;
