-- Shard repair. Shards are caches of the files rows and blobs: the service
-- checks every workspace's shard against its files at start, and the operator
-- can ask for one to be rebuilt (`npm run admin -- rebuild-shard`), which the
-- service does at once (told by NOTIFY) or at its next start.
ALTER TABLE workspaces ADD COLUMN shard_rebuild_requested_at timestamptz(3);
CREATE INDEX workspaces_shard_rebuild ON workspaces (id) WHERE shard_rebuild_requested_at IS NOT NULL;

-- The ingest thread visits workspaces across accounts; this function runs as
-- the owner and returns only their keys (and whether a rebuild was asked for).
-- Everything after it runs inside the workspace's account.
CREATE FUNCTION workspace_shards(only_requested boolean)
  RETURNS TABLE (id uuid, account_id uuid, rebuild_requested_at timestamptz)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
    SELECT w.id, w.account_id, w.shard_rebuild_requested_at FROM public.workspaces w
     WHERE NOT only_requested OR w.shard_rebuild_requested_at IS NOT NULL
     ORDER BY w.id
  $$;
REVOKE ALL ON FUNCTION workspace_shards(boolean) FROM PUBLIC;
