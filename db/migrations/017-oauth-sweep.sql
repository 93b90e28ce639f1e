-- What OAuth no longer needs is deleted after a retention period (VFS_OAUTH_RETENTION_SECONDS,
-- docs/oauth.md#sweeping), by every node periodically (deleting twice is harmless):
--   - registered clients that never got a grant (a client known by its metadata document gets
--     its row only with a grant, so never qualifies);
--   - authorization codes past their expiry or their use: a used one is kept the retention
--     period so that a replay is still seen as one and revokes its grant;
--   - refresh tokens past their expiry or their use (rotated: kept likewise for replay
--     detection), or whose grant was revoked.
-- Grants themselves stay, revoked or not: they are the record of what a person approved.
-- It runs across accounts, so as SECURITY DEFINER; each table's deletions are bounded by
-- `batch`, and the caller repeats while something was deleted.

CREATE INDEX oauth_codes_expires ON oauth_codes (expires_at);
CREATE INDEX oauth_refresh_tokens_expires ON oauth_refresh_tokens (expires_at);
CREATE INDEX oauth_clients_created ON oauth_clients (created_at);
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);

CREATE FUNCTION oauth_sweep(keep_seconds integer, batch integer)
  RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  cutoff timestamptz := now() - make_interval(secs => keep_seconds);
  codes integer;
  refresh integer;
  clients integer;
BEGIN
  DELETE FROM public.oauth_codes c WHERE c.code_hash IN (
    SELECT x.code_hash FROM public.oauth_codes x WHERE x.expires_at < cutoff OR x.used_at < cutoff LIMIT batch);
  GET DIAGNOSTICS codes = ROW_COUNT;
  DELETE FROM public.oauth_refresh_tokens r WHERE r.id IN (
    SELECT x.id FROM public.oauth_refresh_tokens x LEFT JOIN public.oauth_grants g ON g.id = x.grant_id
     WHERE x.expires_at < cutoff OR x.used_at < cutoff OR g.revoked_at < cutoff LIMIT batch);
  GET DIAGNOSTICS refresh = ROW_COUNT;
  DELETE FROM public.oauth_clients c WHERE c.id IN (
    SELECT x.id FROM public.oauth_clients x
     WHERE x.created_at < cutoff AND NOT EXISTS (SELECT 1 FROM public.oauth_grants g WHERE g.client_id = x.id) LIMIT batch);
  GET DIAGNOSTICS clients = ROW_COUNT;
  RETURN codes + refresh + clients;
END
$$;
REVOKE ALL ON FUNCTION oauth_sweep(integer, integer) FROM PUBLIC;
