-- Many nodes on one database and one object store (docs/many-nodes.md).
--
-- The change log: every change that moves a workspace's readable content (a file
-- ready, deleted, or gone with its workspace) is written in the same transaction
-- as the workspace's version bump, naming the path and the version it made. A
-- node brings its copy of a shard up to a version by reading the paths changed
-- since the version it holds, and each path's row as it is now.
CREATE TABLE workspace_changes (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  version bigint NOT NULL,
  path text COLLATE "C" NOT NULL,
  made_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX workspace_changes_since ON workspace_changes (workspace_id, version);
CREATE INDEX workspace_changes_age ON workspace_changes (made_at);
ALTER TABLE workspace_changes ENABLE ROW LEVEL SECURITY;
ALTER TABLE workspace_changes FORCE ROW LEVEL SECURITY;
CREATE POLICY owner_all ON workspace_changes TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE POLICY tenant ON workspace_changes USING (account_id = current_account()) WITH CHECK (account_id = current_account());

-- The oldest version the log still covers per workspace: a node whose copy is
-- older than this compares its whole shard with the rows instead.
ALTER TABLE workspaces ADD COLUMN changes_from bigint NOT NULL DEFAULT 0;

-- Committed versions of workspaces, asked before a read on a node that may hold
-- an older copy (read-your-writes across nodes). Runs as the owner across
-- accounts; returns only versions, for ids the caller already holds.
CREATE FUNCTION workspace_versions(ids uuid[])
  RETURNS TABLE (id uuid, version bigint)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$ SELECT w.id, w.version FROM public.workspaces w WHERE w.id = ANY(ids) $$;
REVOKE ALL ON FUNCTION workspace_versions(uuid[]) FROM PUBLIC;

-- Membership: one row per service node, its heartbeat, state and what it holds.
-- No tenant data: the application role reads and writes it directly.
CREATE TABLE nodes (
  id text PRIMARY KEY,
  url text,
  state text NOT NULL CHECK (state IN ('active', 'draining', 'stopped')),
  started_at timestamptz(3) NOT NULL DEFAULT now(),
  seen_at timestamptz(3) NOT NULL DEFAULT now(),
  cache_bytes bigint NOT NULL DEFAULT 0,
  -- workspace id -> the version of the workspace its copy of the shard holds
  applied jsonb NOT NULL DEFAULT '{}'
);
