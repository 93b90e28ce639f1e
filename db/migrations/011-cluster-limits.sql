-- Limits held for every service node on this database (VFS_CLUSTER_LIMITS=on,
-- api/shared-limits.ts): the GCRA buckets of the read and management rates, and
-- the failed authentications per client address. Each node checks its own
-- buckets first and sends only what they admit, all its waiting checks in one
-- call of a function below per round trip.
--
-- Both tables are UNLOGGED: they are not written to the WAL (a bucket changes
-- with every admitted request), and after a crash of PostgreSQL they start
-- empty, which only forgives what was counted before. Times are milliseconds
-- since the epoch on the database's clock, so the nodes' clocks do not matter.
-- A row whose time has passed means the same as no row (a full bucket, an
-- ended window): `sweep_cluster_limits` deletes those, so each table holds only
-- the keys and addresses in use within the last sweep interval.

-- Per key (`c:<credential>`, `a:<account>`, `m:<credential>`), the theoretical
-- arrival time of the next request.
CREATE UNLOGGED TABLE rate_buckets (
  key text PRIMARY KEY,
  tat float8 NOT NULL
);

-- Per client address, the failed authentications in the window that ends at
-- `window_end`.
CREATE UNLOGGED TABLE auth_failures (
  address text PRIMARY KEY,
  window_end float8 NOT NULL,
  failures integer NOT NULL
);

-- Takes one slot per key from each request of a batch that all its keys allow,
-- in the order given (the generic cell rate algorithm of api/rate-limit.ts).
-- `keys` are distinct, with the emission interval and the burst tolerance
-- (interval × (burst - 1)) of each in ms; request r uses the keys at the
-- positions members[ends[r-1]+1 .. ends[r]] (1-based). Returns, per request,
-- 0 when admitted or the ms to wait, and per key the ms its TAT is ahead of
-- now after the batch (0 when the bucket is full), so that a node's own
-- buckets can catch up with the other nodes' requests.
CREATE FUNCTION take_rate_limits(keys text[], intervals float8[], tolerances float8[], members integer[], ends integer[],
  OUT waits float8[], OUT ahead float8[])
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  now_ms float8;
  tats float8[];
  wait float8;
  lo integer := 1;
BEGIN
  -- Every key of the batch is locked in one order (a new key as it is inserted), so that the
  -- batches of two nodes wait for each other and never deadlock.
  WITH locked AS (
    INSERT INTO public.rate_buckets AS b (key, tat)
    SELECT u.key, 0 FROM unnest(keys) AS u(key) ORDER BY u.key
        ON CONFLICT (key) DO UPDATE SET tat = b.tat
    RETURNING b.key, b.tat
  )
  SELECT array_agg(l.tat ORDER BY u.i) INTO tats
    FROM unnest(keys) WITH ORDINALITY AS u(key, i) JOIN locked l ON l.key = u.key;
  -- After the locks: a batch that waited for another one sees the time after it.
  now_ms := extract(epoch FROM clock_timestamp())::float8 * 1000;
  FOR k IN 1 .. cardinality(keys) LOOP
    tats[k] := greatest(tats[k], now_ms);
  END LOOP;
  waits := array_fill(0::float8, ARRAY[cardinality(ends)]);
  FOR r IN 1 .. cardinality(ends) LOOP
    wait := 0;
    FOR m IN lo .. ends[r] LOOP
      wait := greatest(wait, tats[members[m]] - tolerances[members[m]] - now_ms);
    END LOOP;
    IF wait > 0 THEN
      waits[r] := wait;
    ELSE
      FOR m IN lo .. ends[r] LOOP
        tats[members[m]] := tats[members[m]] + intervals[members[m]];
      END LOOP;
    END IF;
    lo := ends[r] + 1;
  END LOOP;
  UPDATE public.rate_buckets b SET tat = u.tat FROM unnest(keys, tats) AS u(key, tat) WHERE b.key = u.key;
  SELECT array_agg(t - now_ms ORDER BY i) INTO ahead FROM unnest(tats) WITH ORDINALITY AS u(t, i);
END
$$;
REVOKE ALL ON FUNCTION take_rate_limits(text[], float8[], float8[], integer[], integer[]) FROM PUBLIC;

-- Counts failed authentications (counts[i] from addresses[i], distinct) in
-- fixed windows of `window_ms` from each address's first failure. Returns the
-- addresses locked now (at least `threshold` failures in their window) with
-- the ms the lock lasts; an address that became locked in this call is also
-- announced on the channel vfs_invalidate as `auth-lock <ms> <address>`, so
-- that every node refuses it at once (db/accounts.ts, INVALIDATE_CHANNEL).
CREATE FUNCTION count_auth_failures(addresses text[], counts integer[], threshold integer, window_ms float8)
  RETURNS TABLE (locked text, lasts_ms float8)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  now_ms float8 := extract(epoch FROM clock_timestamp())::float8 * 1000;
  hit record;
BEGIN
  FOR hit IN
    WITH counted AS (
      INSERT INTO public.auth_failures AS f (address, window_end, failures)
      SELECT u.address, now_ms + window_ms, u.n FROM unnest(addresses, counts) AS u(address, n) ORDER BY u.address
          ON CONFLICT (address) DO UPDATE
         SET failures = CASE WHEN f.window_end <= now_ms THEN excluded.failures ELSE f.failures + excluded.failures END,
             window_end = CASE WHEN f.window_end <= now_ms THEN excluded.window_end ELSE f.window_end END
      RETURNING f.address, f.window_end, f.failures
    )
    SELECT c.address, c.window_end - now_ms AS lasts, c.failures - u.n < threshold AS newly
      FROM counted c JOIN unnest(addresses, counts) AS u(address, n) ON u.address = c.address
     WHERE c.failures >= threshold
  LOOP
    IF hit.newly THEN
      PERFORM pg_notify('vfs_invalidate', format('auth-lock %s %s', ceil(hit.lasts)::bigint, hit.address));
    END IF;
    locked := hit.address;
    lasts_ms := hit.lasts;
    RETURN NEXT;
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION count_auth_failures(text[], integer[], integer, float8) FROM PUBLIC;

-- The addresses locked now (at most `max_rows`, the longest locks first), for a
-- node that may have missed announcements (at start, after its listening
-- connection was lost).
CREATE FUNCTION locked_addresses(threshold integer, max_rows integer)
  RETURNS TABLE (locked text, lasts_ms float8)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
  SELECT address, window_end - extract(epoch FROM clock_timestamp())::float8 * 1000 AS lasts
    FROM public.auth_failures
   WHERE failures >= threshold AND window_end > extract(epoch FROM clock_timestamp())::float8 * 1000
   ORDER BY window_end DESC
   LIMIT max_rows
$$;
REVOKE ALL ON FUNCTION locked_addresses(integer, integer) FROM PUBLIC;

-- Deletes the buckets and windows whose time has passed (they mean the same as
-- no row). Rows locked by a batch now are left for the next sweep: the sweep
-- never waits, so it never deadlocks with a batch. Returns the rows deleted.
CREATE FUNCTION sweep_cluster_limits()
  RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  now_ms float8 := extract(epoch FROM clock_timestamp())::float8 * 1000;
  buckets integer;
  windows integer;
BEGIN
  DELETE FROM public.rate_buckets
   WHERE key IN (SELECT key FROM public.rate_buckets WHERE tat < now_ms FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS buckets = ROW_COUNT;
  DELETE FROM public.auth_failures
   WHERE address IN (SELECT address FROM public.auth_failures WHERE window_end < now_ms FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS windows = ROW_COUNT;
  RETURN buckets + windows;
END
$$;
REVOKE ALL ON FUNCTION sweep_cluster_limits() FROM PUBLIC;
