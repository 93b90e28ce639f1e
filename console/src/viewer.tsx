/** A file's text as `cat` gives it, with line numbers, a page at a time. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { tool } from './api';
import { workspaceHref } from './route';
import { ErrorLine } from './ui';

/** Lines per page. */
const PAGE = 200;

interface Page {
  lines: { n: number; text: string }[];
  notes: string[];
  total: number | null;
}

/** Splits `cat` output into numbered lines and the notes the tool adds in brackets. */
export function parseCat(text: string): Page {
  const lines: Page['lines'] = [];
  const notes: string[] = [];
  let total: number | null = null;
  for (const line of text.split('\n')) {
    const m = /^\s*(\d+)\t(.*)$/.exec(line);
    if (m !== null) lines.push({ n: Number(m[1]), text: m[2] });
    else if (line.startsWith('[')) {
      notes.push(line);
      const t = /the file has (\d+)/.exec(line);
      if (t !== null) total = Number(t[1]);
    }
  }
  return { lines, notes, total };
}

export function ViewerTab({ workspace, query }: { workspace: string; query: URLSearchParams }) {
  const path = query.get('path') ?? '';
  const line = Number(query.get('line') ?? 0);
  const offset = Math.max(1, Number(query.get('offset') ?? (line > 0 ? Math.max(1, line - 20) : 1)));
  const [page, setPage] = useState<Page | null>(null);
  const [error, setError] = useState('');
  const [pathInput, setPathInput] = useState(path);
  const marked = useRef<HTMLTableRowElement>(null);

  useEffect(() => {
    setPathInput(path);
    if (path === '') return;
    setPage(null);
    setError('');
    tool(workspace, 'cat', { path, offset, limit: PAGE })
      .then((text) => setPage(parseCat(text)))
      .catch((e: Error) => setError(e.message));
  }, [workspace, path, offset]);

  useEffect(() => {
    marked.current?.scrollIntoView({ block: 'center' });
  }, [page]);

  const open = (event: Event): void => {
    event.preventDefault();
    location.hash = workspaceHref(workspace, 'view', { path: pathInput.startsWith('/') ? pathInput : `/${pathInput}` });
  };
  const go = (to: number): string => workspaceHref(workspace, 'view', { path, offset: Math.max(1, to) });
  const last = page?.lines.at(-1)?.n ?? offset;
  return (
    <div>
      <form class="row" onSubmit={open}>
        <label for="view-path">File path</label>
        <input id="view-path" value={pathInput} onInput={(e) => setPathInput(e.currentTarget.value)} required />
        <button type="submit">Open</button>
      </form>
      <ErrorLine error={error} />
      {path !== '' && page !== null && (
        <>
          <h2 class="path">{path}</h2>
          <nav class="row" aria-label="Pages">
            {offset > 1 && <a href={go(offset - PAGE)}>Previous {PAGE} lines</a>}
            {page.total !== null && last < page.total && <a href={go(last + 1)}>Next {PAGE} lines</a>}
            <span class="muted">
              Lines {page.lines.length === 0 ? 0 : offset}-{last}
              {page.total !== null ? ` of ${page.total}` : ''}
            </span>
          </nav>
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be focusable to be scrolled by keyboard */}
          <section class="code" aria-label={`Text of ${path}`} tabIndex={0}>
            <table>
              <tbody>
                {page.lines.map((l) => (
                  <tr key={l.n} id={`L${l.n}`} ref={l.n === line ? marked : undefined} class={l.n === line ? 'mark' : undefined}>
                    <td class="ln">{l.n}</td>
                    <td>
                      <pre>{l.text}</pre>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
          {page.lines.length === 0 && <p class="muted">No lines here: the file is empty or shorter than line {offset}.</p>}
          {page.notes.map((n) => (
            <p class="muted" key={n}>
              {n}
            </p>
          ))}
        </>
      )}
      {path === '' && <p class="muted">Pick a file in Files or Search, or type its path.</p>}
    </div>
  );
}
