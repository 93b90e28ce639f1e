/**
 * A workspace's audit log: the events since a chosen time, newest first, filtered by tool, actor
 * and path; followed live; exported as JSON Lines (every event since that time).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { type AuditEvent, json, workspacePath } from './api';
import { time } from './format';
import { usePoll } from './route';
import { ErrorLine, TableBox } from './ui';

/** Events held on the page at most. */
const MAX_EVENTS = 5000;

type Page = { events: AuditEvent[]; nextCursor: string | null };

/** Fetches pages after `cursor` until the end or `max` events. */
async function pagesAfter(workspace: string, after: string, cursor: string | null, max: number): Promise<{ events: AuditEvent[]; cursor: string | null }> {
  const events: AuditEvent[] = [];
  let at = cursor;
  for (;;) {
    const q = new URLSearchParams({ limit: '1000' });
    if (after !== '') q.set('after', after);
    if (at !== null) q.set('cursor', at);
    const page = await json<Page>('GET', `${workspacePath(workspace)}/audit?${q}`);
    events.push(...page.events);
    if (page.events.length > 0) at = String(page.events[page.events.length - 1].id);
    if (page.nextCursor === null || events.length >= max) return { events, cursor: at };
  }
}

function pathOf(e: AuditEvent): string {
  const p = (e.params as { path?: unknown } | null)?.path;
  return typeof p === 'string' ? p : '';
}

/** A datetime-local value one hour ago. */
function anHourAgo(): string {
  const d = new Date(Date.now() - 3600_000);
  d.setMinutes(d.getMinutes() - d.getTimezoneOffset());
  return d.toISOString().slice(0, 16);
}

export function AuditTab({ workspace }: { workspace: string }) {
  const [since, setSince] = useState(anHourAgo());
  const [events, setEvents] = useState<AuditEvent[] | null>(null);
  const [toolFilter, setToolFilter] = useState('');
  const [actor, setActor] = useState('');
  const [path, setPath] = useState('');
  const [follow, setFollow] = useState(false);
  const [error, setError] = useState('');
  const cursor = useRef<string | null>(null);
  const afterIso = since === '' ? '' : new Date(since).toISOString();

  useEffect(() => {
    cursor.current = null;
    setEvents(null);
    pagesAfter(workspace, afterIso, null, MAX_EVENTS)
      .then((r) => {
        cursor.current = r.cursor;
        setEvents(r.events.reverse());
        setError('');
      })
      .catch((e: Error) => setError(e.message));
  }, [workspace, afterIso]);

  usePoll(
    async () => {
      if (events === null) return;
      const r = await pagesAfter(workspace, afterIso, cursor.current, MAX_EVENTS);
      if (r.events.length > 0) {
        cursor.current = r.cursor;
        setEvents((old) => [...r.events.reverse(), ...(old ?? [])].slice(0, MAX_EVENTS));
      }
    },
    2000,
    [workspace, afterIso, events === null],
    follow,
  );

  const exportLines = async (): Promise<void> => {
    try {
      const all = await pagesAfter(workspace, afterIso, null, Number.MAX_SAFE_INTEGER);
      const blob = new Blob(
        all.events.map((e) => `${JSON.stringify(e)}\n`),
        { type: 'application/x-ndjson' },
      );
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = `${workspace}-audit.jsonl`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  const tools = [...new Set((events ?? []).map((e) => e.tool))].sort();
  const shown = (events ?? []).filter(
    (e) => (toolFilter === '' || e.tool === toolFilter) && e.actorId.includes(actor) && pathOf(e).toLowerCase().includes(path.toLowerCase()),
  );
  return (
    <div>
      <div class="row wrap">
        <label for="audit-since">Since</label>
        <input id="audit-since" type="datetime-local" value={since} onChange={(e) => setSince(e.currentTarget.value)} />
        <label for="audit-tool">Tool</label>
        <select id="audit-tool" value={toolFilter} onChange={(e) => setToolFilter(e.currentTarget.value)}>
          <option value="">any</option>
          {tools.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
        <label for="audit-actor">Actor</label>
        <input id="audit-actor" value={actor} onInput={(e) => setActor(e.currentTarget.value)} spellcheck={false} />
        <label for="audit-path">Path</label>
        <input id="audit-path" value={path} onInput={(e) => setPath(e.currentTarget.value)} spellcheck={false} />
        <label class="check">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} /> Follow live
        </label>
        <button type="button" onClick={exportLines}>
          Export JSON Lines
        </button>
      </div>
      <ErrorLine error={error} />
      {events === null ? (
        <p class="muted">Loading…</p>
      ) : (
        <>
          <p class="muted" aria-live="polite">
            {shown.length} of {events.length} events{events.length >= MAX_EVENTS ? ` (the newest ${MAX_EVENTS})` : ''}
          </p>
          <TableBox label="Audit events">
            <table>
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Tool</th>
                  <th scope="col">Path</th>
                  <th scope="col">Parameters</th>
                  <th scope="col" class="num">
                    Results
                  </th>
                  <th scope="col" class="num">
                    ms
                  </th>
                </tr>
              </thead>
              <tbody>
                {shown.map((e) => (
                  <tr key={e.id}>
                    <td>{time(e.ts)}</td>
                    <td>
                      {e.actorType === 'token' ? 'token ' : 'key '}
                      <code>{e.actorId.slice(0, 8)}</code>
                    </td>
                    <td>{e.tool}</td>
                    <td class="path">{pathOf(e)}</td>
                    <td>
                      <code class="params">{JSON.stringify(e.params)}</code>
                    </td>
                    <td class="num">{e.resultCount ?? ''}</td>
                    <td class="num">{e.latencyMs ?? ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableBox>
        </>
      )}
    </div>
  );
}
