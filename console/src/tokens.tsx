/**
 * Scoped tokens: mint one (claims, time to live), shown once with a copy button; revoke by id;
 * and "Connect an agent", which mints a token and shows each client's configuration for this
 * workspace's MCP endpoint. The API has no token list (SPEC.md 4.3), so the page keeps the
 * ones minted here, in memory, to revoke them. Below, the workspace's OAuth grants (grants.tsx).
 */
import { useRef, useState } from 'preact/hooks';
import { json, workspacePath } from './api';
import { time } from './format';
import { GrantsCard } from './grants';
import { copy, ErrorLine } from './ui';

interface Minted {
  id: string;
  token: string;
  claims: string[];
  expiresAt: string;
}

/** Time-to-live choices, in seconds (the API takes 60-86400). */
const TTLS = [
  { seconds: 900, label: '15 minutes' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 28800, label: '8 hours' },
  { seconds: 86400, label: '24 hours' },
];

/** Tokens minted by this page, per workspace, until the tab closes. */
const mintedHere = new Map<string, { id: string; claims: string[]; expiresAt: string; revoked: boolean }[]>();

export function TokensTab({ workspace }: { workspace: string }) {
  const [claims, setClaims] = useState('*');
  const [ttl, setTtl] = useState(3600);
  const [minted, setMinted] = useState<Minted | null>(null);
  const [error, setError] = useState('');
  const [revokeId, setRevokeId] = useState('');
  const [revokeNote, setRevokeNote] = useState('');
  const [, redraw] = useState(0);
  const list = mintedHere.get(workspace) ?? [];

  const mint = async (event: Event | null, asked = claims): Promise<Minted | null> => {
    event?.preventDefault();
    setError('');
    const claimList = asked
      .split(',')
      .map((c) => c.trim())
      .filter((c) => c !== '');
    try {
      const made = await json<Minted>('POST', `${workspacePath(workspace)}/tokens`, { claims: claimList.length === 0 ? ['*'] : claimList, ttlSeconds: ttl });
      mintedHere.set(workspace, [{ id: made.id, claims: made.claims, expiresAt: made.expiresAt, revoked: false }, ...list]);
      setMinted(made);
      return made;
    } catch (e) {
      setError((e as Error).message);
      return null;
    }
  };
  const revoke = async (id: string): Promise<void> => {
    setRevokeNote('');
    try {
      await json('DELETE', `/v1/tokens/${encodeURIComponent(id.trim())}`);
      for (const t of list) if (t.id === id.trim()) t.revoked = true;
      setRevokeNote(`Token ${id.trim()} is revoked.`);
      setRevokeId('');
      redraw((n) => n + 1);
    } catch (e) {
      setRevokeNote((e as Error).message);
    }
  };

  return (
    <div class="columns">
      <section class="card" aria-labelledby="mint-title">
        <h2 id="mint-title">Mint a token</h2>
        <form onSubmit={(e) => void mint(e)}>
          <label for="claims">Claims</label>
          <input id="claims" value={claims} onInput={(e) => setClaims(e.currentTarget.value)} aria-describedby="claims-help" spellcheck={false} />
          <p id="claims-help" class="muted small">
            Comma-separated, e.g. <code>user:alice,group:eng</code>; <code>*</code> sees every file.
          </p>
          <label for="ttl">Time to live</label>
          <select id="ttl" value={ttl} onChange={(e) => setTtl(Number(e.currentTarget.value))}>
            {TTLS.map((t) => (
              <option key={t.seconds} value={t.seconds}>
                {t.label}
              </option>
            ))}
          </select>
          <button type="submit">Mint token</button>
        </form>
        <ErrorLine error={error} />
        {minted !== null && <ShownOnce minted={minted} />}
      </section>
      <section class="card" aria-labelledby="revoke-title">
        <h2 id="revoke-title">Revoke a token</h2>
        <form
          class="row wrap"
          onSubmit={(e) => {
            e.preventDefault();
            void revoke(revokeId);
          }}
        >
          <label for="revoke-id">Token id</label>
          <input id="revoke-id" value={revokeId} onInput={(e) => setRevokeId(e.currentTarget.value)} spellcheck={false} required />
          <button type="submit" class="danger">
            Revoke
          </button>
        </form>
        {revokeNote !== '' && <p role="status">{revokeNote}</p>}
        {list.length > 0 && (
          <>
            <h3>Minted in this tab</h3>
            <ul class="plain">
              {list.map((t) => (
                <li key={t.id}>
                  <code>{t.id}</code> ({t.claims.join(', ')}; until {time(t.expiresAt)}){' '}
                  {t.revoked ? (
                    <strong>revoked</strong>
                  ) : (
                    <button type="button" class="danger small" onClick={() => void revoke(t.id)} aria-label={`Revoke token ${t.id}`}>
                      Revoke
                    </button>
                  )}
                </li>
              ))}
            </ul>
          </>
        )}
      </section>
      <ConnectAgent workspace={workspace} mint={() => mint(null, '*')} />
      <GrantsCard workspace={workspace} />
    </div>
  );
}

/** A freshly minted token: the one time it is shown. */
function ShownOnce({ minted }: { minted: Minted }) {
  const ref = useRef<HTMLElement>(null);
  const [copied, setCopied] = useState('');
  return (
    <div class="once" role="status">
      <p>
        <strong>Copy it now: it is not shown again.</strong> Id <code>{minted.id}</code>, claims {minted.claims.join(', ')}, until {time(minted.expiresAt)}.
      </p>
      <code class="secret" ref={ref}>
        {minted.token}
      </code>
      <button type="button" onClick={async () => setCopied((await copy(minted.token, ref.current)) ? 'Copied.' : 'Selected: press Ctrl+C.')}>
        Copy token
      </button>
      <span aria-live="polite"> {copied}</span>
    </div>
  );
}

/** Ready-to-paste configuration for the agents people use, with a token minted for it. */
function ConnectAgent({ workspace, mint }: { workspace: string; mint: () => Promise<Minted | null> }) {
  const [token, setToken] = useState<Minted | null>(null);
  const url = `${location.origin}/v1/workspaces/${encodeURIComponent(workspace)}/mcp`;
  const name = workspace.replace(/[^a-z0-9_-]/g, '-');
  const bearer = token?.token ?? 'svc_at_…';
  const configs = [
    { client: 'Claude Code', where: 'a terminal', text: `claude mcp add --transport http ${name} ${url} --header "Authorization: Bearer ${bearer}"` },
    {
      client: 'Cursor',
      where: '~/.cursor/mcp.json',
      text: JSON.stringify({ mcpServers: { [name]: { url, headers: { Authorization: `Bearer ${bearer}` } } } }, null, 2),
    },
    {
      client: 'VS Code',
      where: '.vscode/mcp.json',
      text: JSON.stringify({ servers: { [name]: { type: 'http', url, headers: { Authorization: `Bearer ${bearer}` } } } }, null, 2),
    },
    {
      client: 'Codex',
      where: `~/.codex/config.toml, with export VFS_TOKEN=${bearer}`,
      text: `[mcp_servers.${name}]\nurl = "${url}"\nbearer_token_env_var = "VFS_TOKEN"`,
    },
  ];
  return (
    <section class="card wide-card" aria-labelledby="connect-title">
      <h2 id="connect-title">Connect an agent</h2>
      <p class="muted">
        Mints a token that sees every file (time to live as chosen above) and shows each client's configuration for this workspace's MCP endpoint,{' '}
        <code>{url}</code>.
      </p>
      <button type="button" onClick={async () => setToken(await mint())}>
        Mint a token for an agent
      </button>
      {token !== null &&
        configs.map((c) => (
          <div key={c.client} class="config">
            <h3>{c.client}</h3>
            <p class="muted small">{c.where}</p>
            <CopyBlock label={`${c.client} configuration`} text={c.text} />
          </div>
        ))}
    </section>
  );
}

function CopyBlock({ label, text }: { label: string; text: string }) {
  const ref = useRef<HTMLPreElement>(null);
  const [copied, setCopied] = useState('');
  return (
    <div class="copy-block">
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a long configuration scrolls, and a scrolling region must take focus to be scrolled by keyboard */}
      <section aria-label={label} tabIndex={0}>
        <pre ref={ref}>{text}</pre>
      </section>
      <button type="button" class="small" onClick={async () => setCopied((await copy(text, ref.current)) ? 'Copied.' : 'Selected: press Ctrl+C.')}>
        Copy
      </button>
      <span aria-live="polite"> {copied}</span>
    </div>
  );
}
