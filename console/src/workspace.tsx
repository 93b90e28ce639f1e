/** One workspace: its tabs. A scoped token gets files (as `find` lists them), the viewer and search. */
import { AuditTab } from './audit';
import { FilesTab } from './files';
import type { Route } from './route';
import { workspaceHref } from './route';
import { SearchTab } from './search';
import type { Identity } from './session';
import { TokensTab } from './tokens';
import { ViewerTab } from './viewer';

type TokenIdentity = Extract<Identity, { kind: 'token' }>;

const TABS = [
  { id: 'files', label: 'Files', forTokens: true },
  { id: 'view', label: 'Viewer', forTokens: true },
  { id: 'search', label: 'Search', forTokens: true },
  { id: 'tokens', label: 'Tokens', forTokens: false },
  { id: 'audit', label: 'Audit', forTokens: false },
];

export function WorkspacePage({ workspace, route, token }: { workspace: string; route: Route; token: TokenIdentity | null }) {
  const tabs = TABS.filter((t) => token === null || t.forTokens);
  const tab = tabs.some((t) => t.id === route.tab) ? route.tab : 'files';
  return (
    <section aria-labelledby="workspace-title">
      <p class="crumbs">
        {token === null && (
          <>
            <a href="#/">Workspaces</a> /{' '}
          </>
        )}
      </p>
      <h1 id="workspace-title">{workspace}</h1>
      <nav class="tabs" aria-label="Workspace">
        {tabs.map((t) => (
          <a key={t.id} href={workspaceHref(workspace, t.id)} aria-current={t.id === tab ? 'page' : undefined}>
            {t.label}
          </a>
        ))}
      </nav>
      {tab === 'files' && <FilesTab workspace={workspace} readOnly={token !== null} />}
      {tab === 'view' && <ViewerTab workspace={workspace} query={route.query} />}
      {tab === 'search' && <SearchTab workspace={workspace} query={route.query} />}
      {tab === 'tokens' && <TokensTab workspace={workspace} />}
      {tab === 'audit' && <AuditTab workspace={workspace} />}
    </section>
  );
}
