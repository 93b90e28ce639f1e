-- The system of record. Every table that holds tenant data carries account_id,
-- has row level security enabled and FORCEd, and a policy that compares
-- account_id with the account set for the transaction (app.account_id, set by
-- set_config(..., true)). With no account set, current_account() is NULL and
-- the policy yields no rows. The owner role (the one running migrations and the
-- operator command) sees every row through an explicit policy; the service's
-- requests run as the application role, which has no such policy.

CREATE FUNCTION current_account() RETURNS uuid
  LANGUAGE sql STABLE
  AS $$ SELECT nullif(current_setting('app.account_id', true), '')::uuid $$;

CREATE TABLE plans (
  name text PRIMARY KEY,
  max_workspaces integer NOT NULL,
  max_files integer NOT NULL,
  max_storage_bytes bigint NOT NULL,
  max_file_bytes bigint NOT NULL,
  read_rate_per_credential integer NOT NULL,
  read_rate_per_account integer NOT NULL
);

INSERT INTO plans VALUES
  ('default', 100, 100000, 10737418240, 104857600, 50, 200),
  ('large', 1000, 1000000, 107374182400, 1073741824, 200, 1000);

CREATE TABLE accounts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL UNIQUE,
  plan text NOT NULL REFERENCES plans (name),
  -- Per-account overrides of the plan's limits; NULL means "as the plan says".
  max_workspaces integer,
  max_files integer,
  max_storage_bytes bigint,
  max_file_bytes bigint,
  read_rate_per_credential integer,
  read_rate_per_account integer,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);

CREATE TABLE management_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  secret_hash bytea NOT NULL UNIQUE,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  revoked_at timestamptz(3)
);

CREATE TABLE workspaces (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  name text NOT NULL,
  version bigint NOT NULL DEFAULT 0,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  UNIQUE (account_id, name)
);

CREATE TABLE files (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  path text COLLATE "C" NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'ready', 'error')),
  size_bytes bigint NOT NULL,
  content_type text NOT NULL,
  visibility text[],
  blob_sha256 text NOT NULL,
  -- Bumped by every upload of the path; an ingest job carries the generation it was made for.
  generation bigint NOT NULL DEFAULT 1,
  error_detail text,
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, path)
);
CREATE INDEX files_account ON files (account_id);

CREATE TABLE tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  secret_hash bytea NOT NULL UNIQUE,
  claims text[] NOT NULL,
  expires_at timestamptz(3) NOT NULL,
  revoked_at timestamptz(3),
  created_at timestamptz(3) NOT NULL DEFAULT now()
);

-- Append-only: no foreign key to workspaces, so deleting a workspace never
-- rewrites its history; a trigger refuses UPDATE and DELETE for everyone.
CREATE TABLE audit_events (
  id bigserial PRIMARY KEY,
  account_id uuid NOT NULL,
  workspace_id uuid NOT NULL,
  actor_type text NOT NULL,
  actor_id text NOT NULL,
  tool text NOT NULL,
  params jsonb NOT NULL,
  result_count integer,
  latency_ms integer,
  ts timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_workspace ON audit_events (workspace_id, id);

CREATE FUNCTION audit_events_append_only() RETURNS trigger
  LANGUAGE plpgsql
  AS $$ BEGIN RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP; END $$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

CREATE TABLE ingest_jobs (
  id bigserial PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  path text COLLATE "C" NOT NULL,
  generation bigint NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  run_after timestamptz(3) NOT NULL DEFAULT now(),
  lease_until timestamptz(3),
  last_error text,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX ingest_jobs_runnable ON ingest_jobs (run_after, id);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['accounts', 'management_keys', 'workspaces', 'files', 'tokens', 'audit_events', 'ingest_jobs'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY owner_all ON %I TO CURRENT_USER USING (true) WITH CHECK (true)', t);
    IF t = 'accounts' THEN
      EXECUTE format('CREATE POLICY tenant ON %I USING (id = current_account()) WITH CHECK (id = current_account())', t);
    ELSE
      EXECUTE format('CREATE POLICY tenant ON %I USING (account_id = current_account()) WITH CHECK (account_id = current_account())', t);
    END IF;
  END LOOP;
END $$;

-- Credential lookups run before the account is known. These functions run as
-- the owner and return only the row whose secret hash the caller already holds.
CREATE FUNCTION auth_management_key(hash bytea)
  RETURNS TABLE (key_id uuid, account_id uuid, secret_hash bytea)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$ SELECT id, account_id, secret_hash FROM public.management_keys WHERE secret_hash = hash AND revoked_at IS NULL $$;

CREATE FUNCTION auth_token(hash bytea)
  RETURNS TABLE (token_id uuid, account_id uuid, workspace_id uuid, secret_hash bytea, claims text[], expires_at timestamptz)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$ SELECT id, account_id, workspace_id, secret_hash, claims, expires_at FROM public.tokens
        WHERE secret_hash = hash AND revoked_at IS NULL $$;

REVOKE ALL ON FUNCTION auth_management_key(bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION auth_token(bytea) FROM PUBLIC;
