-- Which files reference a blob: asked when a file is deleted or replaced (is
-- its old blob still used?) and by the blob sweep, 100 blobs at a time, for
-- every blob of every account. Without an index each question read all of the
-- account's file rows: a sweep over the 78,000 files of the Linux tree took
-- about 13 s of PostgreSQL's time. Blobs are stored per account, and row level
-- security adds the account to every such query.
CREATE INDEX files_blob ON files (account_id, blob_sha256);
