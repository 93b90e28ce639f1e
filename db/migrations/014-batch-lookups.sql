-- Lookups of a batch's rows by key, whatever the planner believes of the tables' sizes.
--
-- Row level security adds `account_id = current_account()` to every statement of a tenant, and
-- before the tables' statistics catch up (a new service, or an account growing fast) the planner
-- took that for a handful of rows: a batch's lookups then read every file of the account through
-- `files_account`, and each claim scanned the whole queue. The statements now name the batch's
-- keys where an index can use them (db/ingest-jobs.ts, db/files.ts), the claim takes its jobs by
-- id, and `files_account` goes: `files_blob` (account_id, blob_sha256) serves every lookup by
-- account, and a blob's files are then found by both columns.
DROP INDEX files_account;

CREATE OR REPLACE FUNCTION claim_ingest_jobs(max_jobs integer, lease_seconds integer)
  RETURNS TABLE (id bigint, account_id uuid, workspace_id uuid, path text, generation bigint, attempts integer)
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
    UPDATE public.ingest_jobs j
       SET lease_until = now() + make_interval(secs => lease_seconds), attempts = j.attempts + 1
     WHERE j.id = ANY (ARRAY(SELECT q.id FROM public.ingest_jobs q
                              WHERE q.run_after <= now() AND (q.lease_until IS NULL OR q.lease_until < now())
                              ORDER BY q.id LIMIT max_jobs FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.account_id, j.workspace_id, j.path, j.generation, j.attempts
  $$;
REVOKE ALL ON FUNCTION claim_ingest_jobs(integer, integer) FROM PUBLIC;
