-- Audit batches name each caller once. Under load a batch carries hundreds of
-- events from a few callers (account, workspace, actor, tool), and
-- append_audit_events parsed all eight fields of every event out of one JSON
-- document, twice (once for the account check): about a third of
-- PostgreSQL's time per event. Here the callers come as arrays, one element
-- per distinct caller, and each event as the 1-based index of its caller, its
-- result count and latency; the events' params come as one JSON array (an
-- array of jsonb would make every document an escaped array element). Events
-- get ids in the order given.
--
-- As before, the function runs as the owner and refuses (inserting nothing of)
-- a batch in which a caller's workspace belongs to another account than the
-- caller's; an event whose workspace was deleted meanwhile is kept.
CREATE FUNCTION append_audit_batch(
  account_ids uuid[], workspace_ids uuid[], actor_types text[], actor_ids text[], tools text[],
  callers integer[], params jsonb, result_counts integer[], latencies integer[]
)
  RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  inserted integer;
BEGIN
  IF EXISTS (
    SELECT 1
      FROM unnest(account_ids, workspace_ids) AS c(account_id, workspace_id)
      JOIN public.workspaces w ON w.id = c.workspace_id
     WHERE w.account_id <> c.account_id
  ) THEN
    RAISE EXCEPTION 'audit event for a workspace of another account';
  END IF;
  INSERT INTO public.audit_events (account_id, workspace_id, actor_type, actor_id, tool, params, result_count, latency_ms)
  SELECT account_ids[e.caller], workspace_ids[e.caller], actor_types[e.caller], actor_ids[e.caller], tools[e.caller], params -> (e.ord::integer - 1), e.result_count, e.latency_ms
    FROM unnest(callers, result_counts, latencies) WITH ORDINALITY AS e(caller, result_count, latency_ms, ord)
   ORDER BY e.ord;
  GET DIAGNOSTICS inserted = ROW_COUNT;
  RETURN inserted;
END
$$;
REVOKE ALL ON FUNCTION append_audit_batch(uuid[], uuid[], text[], text[], text[], integer[], jsonb, integer[], integer[]) FROM PUBLIC;

DROP FUNCTION append_audit_events(jsonb);
