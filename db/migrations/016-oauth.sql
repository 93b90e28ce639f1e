-- OAuth 2.1 for MCP clients (docs/oauth.md). A person approves a client on the authorization
-- page with an access key of the workspace; that makes a grant, and everything the client gets
-- afterwards hangs off the grant: one-use authorization codes, rotating refresh tokens, and
-- access tokens, which are rows of `tokens` (svc_at_, so every check of a scoped token applies)
-- carrying the grant's id.
--
-- Clients are global (dynamic registration happens before any account is known) and hold
-- nothing secret: public clients, a name and redirect URIs. Grants, codes and refresh tokens
-- are tenant data under the same row level security as the rest; a code or a refresh token is
-- found before its account is known through a SECURITY DEFINER function that returns only the
-- row whose hash the caller holds, and marks it used in the same statement, so that a second
-- use is seen as one even when two arrive at once.

CREATE TABLE oauth_clients (
  id text PRIMARY KEY,
  name text,
  redirect_uris text[] NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);

CREATE TABLE oauth_grants (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  client_id text NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
  claims text[] NOT NULL,
  -- Who approved: a management key of the account, or a scoped token of the workspace. A grant
  -- approved by a token ends when that token does (expires_at, and revoke_token_grants below).
  approved_by_key uuid REFERENCES management_keys (id) ON DELETE CASCADE,
  approved_by_token uuid REFERENCES tokens (id) ON DELETE CASCADE,
  redirect_uri text NOT NULL,
  scope text NOT NULL,
  resource text NOT NULL,
  expires_at timestamptz(3),
  revoked_at timestamptz(3),
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  CHECK ((approved_by_key IS NULL) <> (approved_by_token IS NULL))
);
CREATE INDEX oauth_grants_workspace ON oauth_grants (workspace_id);
CREATE INDEX oauth_grants_token ON oauth_grants (approved_by_token) WHERE approved_by_token IS NOT NULL;
CREATE INDEX oauth_grants_key ON oauth_grants (approved_by_key) WHERE approved_by_key IS NOT NULL;

CREATE TABLE oauth_codes (
  code_hash bytea PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  grant_id uuid NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
  client_id text NOT NULL,
  redirect_uri text NOT NULL,
  code_challenge text NOT NULL,
  resource text NOT NULL,
  expires_at timestamptz(3) NOT NULL,
  used_at timestamptz(3)
);
CREATE INDEX oauth_codes_grant ON oauth_codes (grant_id);

CREATE TABLE oauth_refresh_tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  grant_id uuid NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
  secret_hash bytea NOT NULL UNIQUE,
  expires_at timestamptz(3) NOT NULL,
  used_at timestamptz(3),
  created_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- An access token issued through OAuth names its grant: it is accepted on its workspace's MCP
-- endpoint only, and goes when the grant does.
ALTER TABLE tokens ADD COLUMN grant_id uuid REFERENCES oauth_grants (id) ON DELETE CASCADE;
CREATE INDEX tokens_grant ON tokens (grant_id) WHERE grant_id IS NOT NULL;

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['oauth_grants', 'oauth_codes', 'oauth_refresh_tokens'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY owner_all ON %I TO CURRENT_USER USING (true) WITH CHECK (true)', t);
    EXECUTE format('CREATE POLICY tenant ON %I USING (account_id = current_account()) WITH CHECK (account_id = current_account())', t);
  END LOOP;
END $$;

-- auth_token also returns the grant of an OAuth access token (null for a minted one). Such a
-- token lives only while its grant does: a token of a revoked or expired grant is refused
-- whatever its own row says (one issued by a refresh that overlapped the grant's revocation).
DROP FUNCTION auth_token(bytea);
CREATE FUNCTION auth_token(hash bytea)
  RETURNS TABLE (token_id uuid, account_id uuid, workspace_id uuid, secret_hash bytea, claims text[], expires_at timestamptz, grant_id uuid)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$ SELECT t.id, t.account_id, t.workspace_id, t.secret_hash, t.claims, t.expires_at, t.grant_id FROM public.tokens t
          LEFT JOIN public.oauth_grants g ON g.id = t.grant_id
        WHERE t.secret_hash = hash AND t.revoked_at IS NULL
          AND (t.grant_id IS NULL OR (g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > now()))) $$;
REVOKE ALL ON FUNCTION auth_token(bytea) FROM PUBLIC;

-- Takes an authorization code issued to `client`: marks it used and returns it with whether it had
-- been used before (`reused`), or nothing for an unknown hash or another client's code (which is
-- left as it was: a code sent by the wrong client uses nothing up).
CREATE FUNCTION oauth_take_code(hash bytea, client text)
  RETURNS TABLE (account_id uuid, grant_id uuid, client_id text, redirect_uri text, code_challenge text, resource text, expired boolean, reused boolean)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  r public.oauth_codes;
BEGIN
  SELECT * INTO r FROM public.oauth_codes c WHERE c.code_hash = hash AND c.client_id = client FOR UPDATE;
  IF NOT FOUND THEN RETURN; END IF;
  UPDATE public.oauth_codes c SET used_at = now() WHERE c.code_hash = hash AND c.used_at IS NULL;
  RETURN QUERY SELECT r.account_id, r.grant_id, r.client_id, r.redirect_uri, r.code_challenge, r.resource, r.expires_at <= now(), r.used_at IS NOT NULL;
END
$$;
REVOKE ALL ON FUNCTION oauth_take_code(bytea, text) FROM PUBLIC;

-- Takes a refresh token of a grant of `client` likewise: marks it used, and says whether it had
-- been; another client's token is left as it was.
CREATE FUNCTION oauth_take_refresh_token(hash bytea, client text)
  RETURNS TABLE (account_id uuid, grant_id uuid, secret_hash bytea, expired boolean, reused boolean)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
DECLARE
  r public.oauth_refresh_tokens;
BEGIN
  SELECT t.* INTO r FROM public.oauth_refresh_tokens t JOIN public.oauth_grants g ON g.id = t.grant_id
    WHERE t.secret_hash = hash AND g.client_id = client FOR UPDATE OF t;
  IF NOT FOUND THEN RETURN; END IF;
  UPDATE public.oauth_refresh_tokens t SET used_at = now() WHERE t.id = r.id AND t.used_at IS NULL;
  RETURN QUERY SELECT r.account_id, r.grant_id, r.secret_hash, r.expires_at <= now(), r.used_at IS NOT NULL;
END
$$;
REVOKE ALL ON FUNCTION oauth_take_refresh_token(bytea, text) FROM PUBLIC;

-- Whether the credential that approved a grant (a management key or a scoped token of the
-- transaction's account) is still unrevoked and unexpired. Its row is locked FOR SHARE until the
-- caller's transaction ends, so a revocation of it waits for a grant being made or used, and then
-- sees (and revokes) what that transaction wrote; one that committed first is seen here. Called
-- when a grant is made, in the transaction that inserts it, and at every use of the grant.
CREATE FUNCTION oauth_approver_live(key_id uuid, token_id uuid)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
BEGIN
  IF key_id IS NOT NULL THEN
    PERFORM 1 FROM public.management_keys k
      WHERE k.id = key_id AND k.account_id = public.current_account() AND k.revoked_at IS NULL FOR SHARE;
  ELSE
    PERFORM 1 FROM public.tokens t
      WHERE t.id = token_id AND t.account_id = public.current_account() AND t.revoked_at IS NULL AND t.expires_at > now() FOR SHARE;
  END IF;
  RETURN FOUND;
END
$$;
REVOKE ALL ON FUNCTION oauth_approver_live(uuid, uuid) FROM PUBLIC;

-- The account and grant of an access token, for revocation at /oauth/revoke (RFC 7009): only the
-- row whose hash the caller holds.
CREATE FUNCTION oauth_access_token(hash bytea)
  RETURNS TABLE (token_id uuid, account_id uuid, grant_id uuid, secret_hash bytea)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$ SELECT id, account_id, grant_id, secret_hash FROM public.tokens WHERE secret_hash = hash AND grant_id IS NOT NULL $$;
REVOKE ALL ON FUNCTION oauth_access_token(bytea) FROM PUBLIC;

-- The key that signs the authorization page's CSRF tokens, the same on every node: the first
-- caller's candidate is kept. Not readable as a table by the application role.
CREATE TABLE oauth_secrets (
  name text PRIMARY KEY,
  secret bytea NOT NULL
);
CREATE FUNCTION oauth_secret(secret_name text, candidate bytea)
  RETURNS bytea
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public
  AS $$
BEGIN
  INSERT INTO public.oauth_secrets (name, secret) VALUES (secret_name, candidate) ON CONFLICT (name) DO NOTHING;
  RETURN (SELECT s.secret FROM public.oauth_secrets s WHERE s.name = secret_name);
END
$$;
REVOKE ALL ON FUNCTION oauth_secret(text, bytea) FROM PUBLIC;
