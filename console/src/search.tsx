/** `grep` as an agent calls it: the same parameters, the same answer, each hit a link to its line. */
import { useEffect, useState } from 'preact/hooks';
import { tool } from './api';
import { workspaceHref } from './route';
import { ErrorLine } from './ui';

/** Lines of output asked for. */
const HEAD_LIMIT = 500;

export function SearchTab({ workspace, query }: { workspace: string; query: URLSearchParams }) {
  const [pattern, setPattern] = useState(query.get('pattern') ?? '');
  const [insensitive, setInsensitive] = useState(query.get('i') === '1');
  const [glob, setGlob] = useState(query.get('glob') ?? '');
  const [output, setOutput] = useState<string | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  const run = async (p: string, i: boolean, g: string): Promise<void> => {
    setBusy(true);
    setError('');
    try {
      setOutput(await tool(workspace, 'grep', { pattern: p, '-i': i, glob: g, output_mode: 'content', head_limit: HEAD_LIMIT }));
    } catch (e) {
      setOutput(null);
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  // A search link (the hash holds its parameters) runs when opened.
  useEffect(() => {
    if (query.get('pattern')) void run(query.get('pattern') ?? '', query.get('i') === '1', query.get('glob') ?? '');
  }, [workspace]);

  const submit = (event: Event): void => {
    event.preventDefault();
    history.replaceState(null, '', workspaceHref(workspace, 'search', { pattern, ...(insensitive ? { i: 1 } : {}), ...(glob ? { glob } : {}) }));
    void run(pattern, insensitive, glob);
  };
  const lines = output === null ? [] : output.split('\n').filter((l) => l !== '');
  return (
    <div>
      <form class="row wrap" onSubmit={submit}>
        <label for="grep-pattern">Pattern</label>
        <input id="grep-pattern" class="wide" value={pattern} onInput={(e) => setPattern(e.currentTarget.value)} spellcheck={false} required />
        <label class="check">
          <input type="checkbox" checked={insensitive} onChange={(e) => setInsensitive(e.currentTarget.checked)} /> Case insensitive
        </label>
        <label for="grep-glob">Glob</label>
        <input id="grep-glob" value={glob} onInput={(e) => setGlob(e.currentTarget.value)} placeholder="*.md" spellcheck={false} />
        <button type="submit" disabled={busy}>
          Search
        </button>
      </form>
      <ErrorLine error={error} />
      {output !== null && (
        <>
          <p class="muted" role="status">
            {lines.length === 0 ? 'No match.' : `${lines.filter((l) => !l.startsWith('[')).length} lines (at most ${HEAD_LIMIT} shown).`}
          </p>
          <ol class="hits">
            {lines.map((l, i) => (
              <li key={i}>
                <Hit workspace={workspace} line={l} />
              </li>
            ))}
          </ol>
        </>
      )}
    </div>
  );
}

/** One line of grep's content output: `path:line:text`, or a note in brackets. */
function Hit({ workspace, line }: { workspace: string; line: string }) {
  const m = /^(\/.*?):(\d+):(.*)$/.exec(line);
  if (m === null) return <code class="muted">{line}</code>;
  const [, path, n, text] = m;
  return (
    <code>
      <a href={workspaceHref(workspace, 'view', { path, line: n })}>
        {path}:{n}
      </a>
      :{text}
    </code>
  );
}
