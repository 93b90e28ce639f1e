-- Shard snapshots: the object key of the latest consistent copy of a workspace's
-- shard in the object store (ingest/shards/snapshots.ts), and when it was made. A
-- shard lost with its machine is restored from it, then brought up to date from
-- the file rows and the kept texts.
ALTER TABLE workspaces ADD COLUMN shard_snapshot_key text, ADD COLUMN shard_snapshot_at timestamptz(3);
