/** The database enforces isolation and append-only audit, whatever the service code does. */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog, type AuditRecord } from '../db/audit.js';
import { startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let su: pg.Client;
let app: pg.Client;
let accountId: string;
let workspaceId: string;
beforeAll(async () => {
  t = await startTestService();
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'ws' } })).status).toBe(201);
  su = await t.superuser();
  app = new pg.Client(t.targets.app);
  await app.connect();
  const { rows } = await su.query("SELECT id, account_id FROM workspaces WHERE name = 'ws'");
  workspaceId = rows[0].id;
  accountId = rows[0].account_id;
});
afterAll(async () => {
  await app?.end();
  await su?.end();
  await t?.stop();
});

describe('catalog', () => {
  it('every tenant table has row level security enabled and forced', async () => {
    const { rows } = await su.query(`
      SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' AND c.relkind = 'r'
         AND (EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'account_id' AND NOT a.attisdropped)
              OR c.relname = 'accounts')`);
    const names = rows.map((r) => r.relname).sort();
    expect(names).toEqual([
      'account_usage',
      'accounts',
      'audit_events',
      'blob_packs',
      'files',
      'ingest_jobs',
      'management_keys',
      'oauth_codes',
      'oauth_grants',
      'oauth_refresh_tokens',
      'tokens',
      'workspace_changes',
      'workspaces',
    ]);
    for (const row of rows) expect([row.relname, row.relrowsecurity, row.relforcerowsecurity]).toEqual([row.relname, true, true]);
  });

  it('the application role owns nothing, is not superuser, cannot bypass RLS', async () => {
    const role = await su.query('SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = $1', [t.names.appRole]);
    expect(role.rows[0]).toEqual({ rolsuper: false, rolbypassrls: false, rolcreaterole: false, rolcreatedb: false });
    const owned = await su.query(
      `SELECT c.relname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE r.rolname = $1
       UNION ALL SELECT p.proname FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE r.rolname = $1
       UNION ALL SELECT n.nspname FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner WHERE r.rolname = $1
       UNION ALL SELECT d.datname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE r.rolname = $1`,
      [t.names.appRole],
    );
    expect(owned.rows).toEqual([]);
  });
});

describe('the application role', () => {
  it('sees no tenant rows without an account set', async () => {
    for (const table of ['accounts', 'workspaces', 'files', 'tokens', 'audit_events', 'ingest_jobs', 'oauth_grants', 'oauth_codes', 'oauth_refresh_tokens']) {
      const { rows } = await app.query(`SELECT count(*)::int AS n FROM ${table}`);
      expect([table, rows[0].n]).toEqual([table, 0]);
    }
  });

  it('sees its account rows once the account is set, and none of another account', async () => {
    await app.query('BEGIN');
    try {
      await app.query("SELECT set_config('app.account_id', $1, true)", [accountId]);
      expect((await app.query('SELECT name FROM workspaces')).rows).toEqual([{ name: 'ws' }]);
      await app.query("SELECT set_config('app.account_id', $1, true)", ['00000000-0000-4000-8000-000000000000']);
      expect((await app.query('SELECT name FROM workspaces')).rows).toEqual([]);
      await expect(app.query("INSERT INTO workspaces (account_id, name) VALUES ($1, 'sneaky')", [accountId])).rejects.toThrow(/row-level security/);
    } finally {
      await app.query('ROLLBACK');
    }
  });

  it('cannot read management keys or token hashes directly', async () => {
    await expect(app.query('SELECT * FROM management_keys')).rejects.toThrow(/permission denied/);
    await expect(app.query('SELECT * FROM oauth_secrets')).rejects.toThrow(/permission denied/);
    await expect(app.query('SELECT * FROM plans')).resolves.toBeDefined();
  });

  it('can INSERT and SELECT audit events, but never UPDATE or DELETE them', async () => {
    await app.query('BEGIN');
    await app.query("SELECT set_config('app.account_id', $1, true)", [accountId]);
    const { rows } = await app.query(
      `INSERT INTO audit_events (account_id, workspace_id, actor_type, actor_id, tool, params) VALUES ($1, $2, 'token', 'x', 'ls', '{}') RETURNING id`,
      [accountId, workspaceId],
    );
    await app.query('COMMIT');
    const id = rows[0].id;
    for (const sql of ['UPDATE audit_events SET tool = $2 WHERE id = $1', 'DELETE FROM audit_events WHERE id = $1 AND $2::text IS NOT NULL']) {
      await app.query('BEGIN');
      await app.query("SELECT set_config('app.account_id', $1, true)", [accountId]);
      await expect(app.query(sql, [id, 'cat'])).rejects.toThrow(/permission denied/);
      await app.query('ROLLBACK');
    }
    // Not even the owner of the table may rewrite history: the trigger refuses.
    await expect(su.query('UPDATE audit_events SET tool = $2 WHERE id = $1', [id, 'cat'])).rejects.toThrow(/append-only/);
    await expect(su.query('DELETE FROM audit_events WHERE id = $1', [id])).rejects.toThrow(/append-only/);
    const still = await su.query('SELECT tool FROM audit_events WHERE id = $1', [id]);
    expect(still.rows).toEqual([{ tool: 'ls' }]);
  });

  it('appends batches through append_audit_batch, refusing a batch that crosses accounts', async () => {
    const otherKey = await t.newAccount('audit-other');
    expect((await t.call('POST', '/v1/workspaces', { key: otherKey, body: { name: 'theirs' } })).status).toBe(201);
    const theirs = (await su.query("SELECT id, account_id FROM workspaces WHERE name = 'theirs'")).rows[0];
    const deleted = '00000000-0000-4000-8000-00000000dead'; // no such workspace (any more): kept
    // Each event is [account, workspace, actor]; events of one caller share its entry, as AuditLog sends them.
    const append = (batch: string[][]) => {
      const keys = [...new Set(batch.map((e) => e.join(' ')))];
      const callers = keys.map((k) => k.split(' '));
      return app.query('SELECT append_audit_batch($1, $2, $3, $4, $5, $6, $7, $8, $9) AS n', [
        callers.map((c) => c[0]),
        callers.map((c) => c[1]),
        callers.map(() => 'token'),
        callers.map((c) => c[2]),
        callers.map(() => 'ls'),
        batch.map((e) => keys.indexOf(e.join(' ')) + 1),
        JSON.stringify(batch.map((_, i) => ({ path: `/p${i}` }))),
        batch.map(() => 1),
        batch.map((_, i) => i),
      ]);
    };
    const count = async () => Number((await su.query('SELECT count(*) FROM audit_events')).rows[0].count);
    const before = await count();
    for (const cross of [
      [accountId, theirs.id, 'cross-1'], // another account's workspace under this account
      [theirs.account_id, workspaceId, 'cross-2'], // and the other way round
    ]) {
      await expect(append([[accountId, workspaceId, 'mine-0'], cross])).rejects.toThrow(/another account/);
    }
    expect(await count()).toBe(before);
    const { rows } = await append([
      [accountId, workspaceId, 'mine-1'],
      [theirs.account_id, theirs.id, 'theirs-1'],
      [accountId, deleted, 'gone-1'],
      [accountId, workspaceId, 'mine-2'],
      [accountId, workspaceId, 'mine-1'],
    ]);
    expect(rows[0].n).toBe(5);
    const added = await su.query('SELECT account_id, workspace_id, actor_id, params, latency_ms FROM audit_events ORDER BY id OFFSET $1', [before]);
    expect(added.rows).toEqual([
      { account_id: accountId, workspace_id: workspaceId, actor_id: 'mine-1', params: { path: '/p0' }, latency_ms: 0 },
      { account_id: theirs.account_id, workspace_id: theirs.id, actor_id: 'theirs-1', params: { path: '/p1' }, latency_ms: 1 },
      { account_id: accountId, workspace_id: deleted, actor_id: 'gone-1', params: { path: '/p2' }, latency_ms: 2 },
      { account_id: accountId, workspace_id: workspaceId, actor_id: 'mine-2', params: { path: '/p3' }, latency_ms: 3 },
      { account_id: accountId, workspace_id: workspaceId, actor_id: 'mine-1', params: { path: '/p4' }, latency_ms: 4 },
    ]);
  });

  it('AuditLog batches events of several callers, each stored with its own fields', async () => {
    const theirs = (await su.query("SELECT id, account_id FROM workspaces WHERE name = 'theirs'")).rows[0];
    const log = new AuditLog(t.service.db);
    const callers: Array<Pick<AuditRecord, 'accountId' | 'workspaceId' | 'actorType' | 'actorId' | 'tool'>> = [
      { accountId, workspaceId, actorType: 'management_key', actorId: 'key-1', tool: 'cat' },
      { accountId, workspaceId, actorType: 'token', actorId: 'key-1', tool: 'cat' },
      { accountId, workspaceId, actorType: 'token', actorId: 'token-1', tool: 'grep' },
      { accountId: theirs.account_id, workspaceId: theirs.id, actorType: 'token', actorId: 'token-2', tool: 'ls' },
    ];
    // The first append goes alone; the other 19 wait for it and leave together, callers interleaved.
    const records: AuditRecord[] = Array.from({ length: 20 }, (_, i) => ({
      ...callers[(i * 3) % callers.length],
      params: { path: `/batch/${i}` },
      resultCount: i % 5 === 0 ? null : i,
      latencyMs: i,
    }));
    await Promise.all(records.map((r) => log.append(r)));
    const { rows } = await su.query(
      `SELECT account_id, workspace_id, actor_type, actor_id, tool, params, result_count, latency_ms FROM audit_events
        WHERE params->>'path' LIKE '/batch/%' ORDER BY id`,
    );
    expect(rows).toEqual(
      records.map((r) => ({
        account_id: r.accountId,
        workspace_id: r.workspaceId,
        actor_type: r.actorType,
        actor_id: r.actorId,
        tool: r.tool,
        params: r.params,
        result_count: r.resultCount,
        latency_ms: r.latencyMs,
      })),
    );
  });

  it('AuditLog fails only the event PostgreSQL refuses, not the others of its batch', async () => {
    const log = new AuditLog(t.service.db);
    const caller = { accountId, workspaceId, actorType: 'token' as const, actorId: 'poison-test', tool: 'grep' };
    // A lone surrogate: JSON.stringify escapes it, and jsonb refuses the escape.
    const paths = ['/ok/0', '/ok/1', '/ok/2', '/bad/\ud83d', '/ok/4', '/ok/5'];
    const outcomes = await Promise.allSettled(paths.map((path) => log.append({ ...caller, params: { path }, resultCount: 1, latencyMs: 1 })));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    const { rows } = await su.query(`SELECT params->>'path' AS path FROM audit_events WHERE actor_id = 'poison-test' ORDER BY id`);
    expect(rows.map((r) => r.path)).toEqual(['/ok/0', '/ok/1', '/ok/2', '/ok/4', '/ok/5']);
  });
});
