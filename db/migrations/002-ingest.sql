-- Uploads and the ingest queue.

-- Per-account usage, kept exact by a trigger on files (cascades included).
-- Uploads lock the account's row while they check the file-count and storage
-- limits against it (one batch of uploads at a time per account).
CREATE TABLE account_usage (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  files bigint NOT NULL DEFAULT 0,
  bytes bigint NOT NULL DEFAULT 0
);
ALTER TABLE account_usage ENABLE ROW LEVEL SECURITY;
ALTER TABLE account_usage FORCE ROW LEVEL SECURITY;
CREATE POLICY owner_all ON account_usage TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE POLICY tenant ON account_usage USING (account_id = current_account()) WITH CHECK (account_id = current_account());

CREATE FUNCTION files_track_usage() RETURNS trigger
  LANGUAGE plpgsql
  AS $$
  DECLARE
    df bigint := 0;
    db bigint := 0;
  BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN df := df - 1; db := db - OLD.size_bytes; END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN df := df + 1; db := db + NEW.size_bytes; END IF;
    INSERT INTO account_usage AS a (account_id, files, bytes) VALUES (coalesce(NEW.account_id, OLD.account_id), df, db)
      ON CONFLICT (account_id) DO UPDATE SET files = a.files + df, bytes = a.bytes + db;
    RETURN NULL;
  END $$;
CREATE TRIGGER files_track_usage AFTER INSERT OR DELETE OR UPDATE OF size_bytes ON files
  FOR EACH ROW EXECUTE FUNCTION files_track_usage();

-- One queued job per path: a newer upload replaces the older job's generation.
CREATE UNIQUE INDEX ingest_jobs_path ON ingest_jobs (workspace_id, path);

-- Workers claim jobs across accounts; this function runs as the owner and
-- returns only the claimed jobs' keys. Everything after the claim runs inside
-- the job's account.
CREATE FUNCTION claim_ingest_jobs(max_jobs integer, lease_seconds integer)
  RETURNS TABLE (id bigint, account_id uuid, workspace_id uuid, path text, generation bigint, attempts integer)
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
    UPDATE public.ingest_jobs j
       SET lease_until = now() + make_interval(secs => lease_seconds), attempts = j.attempts + 1
     WHERE j.id IN (SELECT q.id FROM public.ingest_jobs q
                     WHERE q.run_after <= now() AND (q.lease_until IS NULL OR q.lease_until < now())
                     ORDER BY q.id LIMIT max_jobs FOR UPDATE SKIP LOCKED)
    RETURNING j.id, j.account_id, j.workspace_id, j.path, j.generation, j.attempts
  $$;
REVOKE ALL ON FUNCTION claim_ingest_jobs(integer, integer) FROM PUBLIC;
