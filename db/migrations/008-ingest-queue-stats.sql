-- Metrics: the ingest queue across accounts, as counts only. Runs as the owner
-- and returns no row of any tenant.
CREATE FUNCTION ingest_queue_stats()
  RETURNS TABLE (jobs bigint, oldest_seconds double precision)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
    SELECT count(*), coalesce(extract(epoch FROM now() - min(j.created_at))::double precision, 0) FROM public.ingest_jobs j
  $$;
REVOKE ALL ON FUNCTION ingest_queue_stats() FROM PUBLIC;
