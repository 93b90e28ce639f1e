/**
 * Where the console is: the part of the URL after `#`, so that every page is one document the
 * server serves as is, and a reload or a shared link opens the same view. Shapes:
 * `#/` workspaces, `#/health`, `#/w/{ws}/{tab}` with tab files, view, search, tokens or audit,
 * and the tab's own state in a query (`?path=/a.txt&line=12`).
 */
import { useEffect, useState } from 'preact/hooks';

/** A parsed location. */
export interface Route {
  page: 'workspaces' | 'health' | 'workspace';
  workspace: string;
  tab: string;
  query: URLSearchParams;
}

/** Parses a hash. */
export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, '');
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  const parts = path.split('/').filter((s) => s !== '');
  if (parts[0] === 'health') return { page: 'health', workspace: '', tab: '', query };
  if (parts[0] === 'w' && parts[1] !== undefined) return { page: 'workspace', workspace: decodeURIComponent(parts[1]), tab: parts[2] ?? 'files', query };
  return { page: 'workspaces', workspace: '', tab: '', query };
}

/** The hash of a workspace tab, with its query. */
export function workspaceHref(workspace: string, tab = 'files', query: Record<string, string | number> = {}): string {
  const q = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)])).toString();
  return `#/w/${encodeURIComponent(workspace)}/${tab}${q === '' ? '' : `?${q}`}`;
}

/** The current route, following every change of the hash. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const changed = (): void => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}

/** Calls `tick` now and every `ms` while mounted and `on`; the tab's visibility pauses it. */
export function usePoll(tick: () => Promise<void> | void, ms: number, deps: unknown[], on = true): void {
  useEffect(() => {
    if (!on) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async (): Promise<void> => {
      if (stopped) return;
      if (document.visibilityState === 'visible') {
        try {
          await tick();
        } catch {
          // the tick shows its own error
        }
      }
      if (!stopped) timer = setTimeout(run, ms);
    };
    void run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, on]);
}
