-- When a file last left `pending` (became ready or error), for the console's count of files
-- ingested per five seconds. `updated_at` cannot say it: it is the upload's time, which the
-- listing shows, `find` orders by and the shards record. NULL: not ingested since this column
-- came (or never); a file uploaded again keeps its value until its ingest ends.
ALTER TABLE files ADD COLUMN finished_at timestamptz(3);
