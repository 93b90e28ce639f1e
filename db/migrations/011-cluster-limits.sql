-- Limits held for every service node on this database (VFS_CLUSTER_LIMITS=on,
-- api/gate/shared-limits.ts): the GCRA buckets of the read and management rates, and
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

-- Takes slots for a batch of requests (the generic cell rate algorithm of
-- api/gate/rate-limit.ts). Requests that use the same keys come as one group of
-- `counts[g]` requests; a request is admitted when every one of its keys
-- allows it, and takes one slot from each. `keys` are distinct and sorted,
-- with the emission interval and the burst tolerance (interval × (burst - 1))
-- of each in ms; group g uses the keys at the positions
-- members[ends[g-1]+1 .. ends[g]] (1-based). Returns per group how many of its
-- requests are admitted and, when not all, the ms the others must wait; and
-- per key the ms its TAT is ahead of now after the batch (0 or less when the
-- bucket is full), so that a node's own buckets can catch up with the other
-- nodes' requests. A group also gives back `returns[g]` slots taken earlier
-- and never used (a node's lease that lapsed): its keys' TATs move back that
-- many intervals, never behind now (a full bucket stays full).
--
-- Written for the cost per call, measured on PostgreSQL 17 with 2 keys: one
-- statement per key to lock and one to write, with plans cached for the
-- session, cost about half of one statement joining `unnest(keys)` to lock and
-- one to write (an upsert of every key to lock them cost twice as much again);
-- and the loop runs per group, as a loop per request cost about 2 µs per
-- request, more than all the rest at a batch of a hundred.
CREATE FUNCTION take_rate_limits(keys text[], intervals float8[], tolerances float8[], members integer[], ends integer[], counts integer[],
  returns integer[],
  OUT admitted integer[], OUT waits float8[], OUT ahead float8[])
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  n integer := cardinality(keys);
  tats float8[] := intervals;
  tat float8;
  now_ms float8;
  fits float8;
  taken integer;
  lo integer := 1;
BEGIN
  -- The keys are locked in the order given, which every node sorts alike: the batches of two
  -- nodes wait for each other and never deadlock. A key seen for the first time starts full.
  FOR k IN 1 .. n LOOP
    SELECT b.tat INTO tat FROM public.rate_buckets b WHERE b.key = keys[k] FOR NO KEY UPDATE;
    IF NOT FOUND THEN
      INSERT INTO public.rate_buckets (key, tat) VALUES (keys[k], 0) ON CONFLICT (key) DO NOTHING;
      SELECT b.tat INTO tat FROM public.rate_buckets b WHERE b.key = keys[k] FOR NO KEY UPDATE;
    END IF;
    -- (Missing still only if a sweep deleted the row in between: a full bucket, as the row said.)
    tats[k] := coalesce(tat, 0);
  END LOOP;
  -- After the locks: a batch that waited for another one sees the time after it.
  now_ms := extract(epoch FROM clock_timestamp())::float8 * 1000;
  FOR k IN 1 .. n LOOP
    tats[k] := greatest(tats[k], now_ms);
  END LOOP;
  admitted := counts;
  waits := array_fill(0::float8, ARRAY[cardinality(ends)]);
  FOR g IN 1 .. cardinality(ends) LOOP
    -- A key admits requests while its TAT - tolerance <= now, each moving its TAT one interval on.
    IF returns[g] > 0 THEN
      FOR m IN lo .. ends[g] LOOP
        tats[members[m]] := greatest(now_ms, tats[members[m]] - returns[g] * intervals[members[m]]);
      END LOOP;
    END IF;
    fits := counts[g];
    FOR m IN lo .. ends[g] LOOP
      fits := least(fits, greatest(0, floor((now_ms + tolerances[members[m]] - tats[members[m]]) / intervals[members[m]]) + 1));
    END LOOP;
    taken := fits::integer;
    admitted[g] := taken;
    FOR m IN lo .. ends[g] LOOP
      tats[members[m]] := tats[members[m]] + taken * intervals[members[m]];
      IF taken < counts[g] THEN
        waits[g] := greatest(waits[g], tats[members[m]] - tolerances[members[m]] - now_ms);
      END IF;
    END LOOP;
    lo := ends[g] + 1;
  END LOOP;
  ahead := tats;
  FOR k IN 1 .. n LOOP
    UPDATE public.rate_buckets SET tat = tats[k] WHERE key = keys[k];
    ahead[k] := tats[k] - now_ms;
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION take_rate_limits(text[], float8[], float8[], integer[], integer[], integer[], integer[]) FROM PUBLIC;

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
