-- Audit events are appended in batches that span accounts, in one statement
-- (one round trip, committed on its own): a batch used to take four (BEGIN
-- with the account, INSERT, COMMIT), and under load each round trip waited a
-- turn of the service's busy event loop. The function runs as the owner and
-- inserts only events whose workspace belongs to the event's account, which is
-- what row level security checked per account; an event whose workspace was
-- deleted meanwhile (with its audit log) is dropped rather than failing the
-- batch. `events` is a JSON array of objects named like the columns; they
-- get ids in the order given. Returns the number inserted.
CREATE FUNCTION append_audit_events(events jsonb)
  RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  inserted integer;
BEGIN
  INSERT INTO public.audit_events (account_id, workspace_id, actor_type, actor_id, tool, params, result_count, latency_ms)
  SELECT e.account_id, e.workspace_id, e.actor_type, e.actor_id, e.tool, e.params, e.result_count, e.latency_ms
    FROM jsonb_array_elements(events) WITH ORDINALITY AS x(event, ord)
   CROSS JOIN LATERAL jsonb_to_record(x.event)
           AS e(account_id uuid, workspace_id uuid, actor_type text, actor_id text, tool text, params jsonb, result_count integer, latency_ms integer)
    JOIN public.workspaces w ON w.id = e.workspace_id AND w.account_id = e.account_id
   ORDER BY x.ord;
  GET DIAGNOSTICS inserted = ROW_COUNT;
  RETURN inserted;
END
$$;
REVOKE ALL ON FUNCTION append_audit_events(jsonb) FROM PUBLIC;
