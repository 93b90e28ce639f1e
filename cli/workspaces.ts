/**
 * `workspaces create|list|delete`: the account's workspaces.
 */
import type { ApiClient } from './client.js';
import type { Output } from './output.js';

/** A workspace as the listing returns it. */
export interface Workspace {
  name: string;
  version: number;
  createdAt: string;
}

/** `workspaces create NAME`. */
export async function workspacesCreate(client: ApiClient, out: Output, name: string): Promise<void> {
  const created = await client.postJson<{ name: string }>('/v1/workspaces', `create workspace ${name}`, { name });
  out.line(out.json ? JSON.stringify(created) : `created workspace ${created.name}`);
}

/** `workspaces list`: one line per workspace (JSON Lines with --json). */
export async function workspacesList(client: ApiClient, out: Output): Promise<void> {
  const { workspaces } = await client.json<{ workspaces: Workspace[] }>({ method: 'GET', path: '/v1/workspaces', what: 'list workspaces' });
  for (const w of workspaces) out.line(out.json ? JSON.stringify(w) : `${w.name}\t${w.createdAt}\tversion ${w.version}`);
}

/** `workspaces delete NAME`. */
export async function workspacesDelete(client: ApiClient, out: Output, name: string): Promise<void> {
  await client.json({ method: 'DELETE', path: `/v1/workspaces/${encodeURIComponent(name)}`, what: `delete workspace ${name}` });
  out.line(out.json ? JSON.stringify({ deleted: name }) : `deleted workspace ${name}`);
}
