/**
 * The audit export, paged through: what the fault and cluster tests compare the
 * responses they received with. Free of vitest, so the benchmarks can load it.
 */

/** Every audit event of a workspace (pages through the export), through any caller of the API (a FaultService, say). */
export async function exportAudit(
  svc: { api: (method: string, path: string) => Promise<Response> },
  ws: string,
): Promise<Array<{ tool: string; params: Record<string, string> }>> {
  const out: Array<{ tool: string; params: Record<string, string> }> = [];
  let cursor: string | null = null;
  do {
    const r = await svc.api('GET', `/v1/workspaces/${ws}/audit?limit=1000${cursor === null ? '' : `&cursor=${cursor}`}`);
    if (r.status !== 200) throw new Error(`audit export: ${r.status} ${await r.text()}`);
    const page = (await r.json()) as { events: Array<{ tool: string; params: Record<string, string> }>; nextCursor: string | null };
    out.push(...page.events);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return out;
}
