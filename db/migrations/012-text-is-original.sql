-- Whether a ready file's text is its original byte for byte (a UTF-8 or ASCII text file without
-- a byte order mark): then no copy of the text is kept in the object store, and a shard is
-- rebuilt from the original itself. False: the text extracted from the original (a PDF, a
-- document, a file with a byte order mark) is kept beside it. NULL: not ingested since its last
-- upload. A file re-queued by a repair keeps its value, so its text is read, not extracted.
ALTER TABLE files ADD COLUMN text_is_original boolean;
-- Before this column every ready file's text was kept.
UPDATE files SET text_is_original = false WHERE status = 'ready';
