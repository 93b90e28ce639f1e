/**
 * The console's frame: sign-in until a credential is accepted, then a header with the pages
 * this credential may use. A management key sees every page; a scoped token sees only its own
 * workspace's files, viewer and search, as the API lets it.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, json, signedOutEvent } from './api';
import { HealthPage } from './health';
import { useRoute, workspaceHref } from './route';
import { forget, type Identity, remember, currentCredential } from './session';
import { WorkspacePage } from './workspace';
import { WorkspacesPage } from './workspaces';

export function App() {
  const [identity, setIdentity] = useState<Identity | null>(null);
  const [checking, setChecking] = useState(currentCredential() !== null);
  const route = useRoute();

  useEffect(() => {
    // A credential kept in this tab's sessionStorage is asked about again after a reload.
    if (currentCredential() !== null)
      json<Identity>('GET', '/v1/whoami')
        .then(setIdentity)
        .catch(() => forget())
        .finally(() => setChecking(false));
    const out = (): void => {
      forget();
      setIdentity(null);
    };
    signedOutEvent.addEventListener('signed-out', out);
    return () => signedOutEvent.removeEventListener('signed-out', out);
  }, []);

  useEffect(() => {
    document.title = identity === null ? 'Sign in · agent-vfs console' : `${route.workspace || route.page} · agent-vfs console`;
  }, [identity, route]);

  if (checking) return <main class="center">Checking your key…</main>;
  if (identity === null) return <SignIn onSignedIn={setIdentity} />;

  const signOut = (): void => {
    forget();
    setIdentity(null);
    location.hash = '';
  };
  const token = identity.kind === 'token' ? identity : null;
  return (
    <>
      <header class="top">
        <a class="brand" href={token === null ? '#/' : workspaceHref(token.workspace)}>
          agent-vfs
        </a>
        <nav aria-label="Main">
          {token === null ? (
            <>
              <a href="#/" aria-current={route.page === 'workspaces' ? 'page' : undefined}>
                Workspaces
              </a>
              <a href="#/health" aria-current={route.page === 'health' ? 'page' : undefined}>
                Health
              </a>
            </>
          ) : (
            <span class="muted">Token for {token.workspace}</span>
          )}
        </nav>
        <button type="button" class="link" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>
        {token !== null ? (
          <WorkspacePage workspace={token.workspace} route={route.workspace === token.workspace ? route : { ...route, tab: 'files' }} token={token} />
        ) : route.page === 'health' ? (
          <HealthPage />
        ) : route.page === 'workspace' ? (
          <WorkspacePage workspace={route.workspace} route={route} token={null} />
        ) : (
          <WorkspacesPage />
        )}
      </main>
    </>
  );
}

function SignIn({ onSignedIn }: { onSignedIn: (identity: Identity) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    const value = key.trim();
    if (!/^svc_(sk|at)_/.test(value)) {
      setError('A management key starts with svc_sk_, a scoped token with svc_at_.');
      return;
    }
    setBusy(true);
    setError('');
    remember(value);
    try {
      onSignedIn(await json<Identity>('GET', '/v1/whoami'));
      setKey('');
    } catch (e) {
      forget();
      setError(e instanceof ApiError && e.status === 401 ? 'The service does not know this key.' : String((e as Error).message));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="center">
      <form class="card signin" onSubmit={submit}>
        <h1>agent-vfs console</h1>
        <p class="muted">Sign in with your account's management key (svc_sk_…), or a scoped token (svc_at_…) to see what it may read.</p>
        <label for="key">Management key</label>
        <input id="key" type="password" autocomplete="off" spellcheck={false} value={key} onInput={(e) => setKey(e.currentTarget.value)} required />
        {error !== '' && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        <p class="muted small">The key stays in this tab only and is forgotten when you sign out or close it.</p>
      </form>
    </main>
  );
}
