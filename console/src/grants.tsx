/**
 * A workspace's OAuth grants (docs/oauth.md): the MCP clients a person let in on the
 * authorization page, with what each may read, and a Revoke button, which ends the grant's
 * access and refresh tokens on the next request on every node. Management key only.
 */
import { useEffect, useState } from 'preact/hooks';
import { json, workspacePath } from './api';
import { time } from './format';
import { ErrorLine, Modal, TableBox } from './ui';

/** A grant as GET /v1/workspaces/{ws}/grants lists it. */
export interface Grant {
  id: string;
  clientId: string;
  clientName: string | null;
  redirectUri: string;
  claims: string[];
  approvedBy: { kind: 'management_key' | 'token'; id: string };
  createdAt: string;
  expiresAt: string | null;
  lastIssuedAt: string | null;
}

/** Grants asked for per page. */
const PAGE = 100;

/** What a person calls the client: its registered name, or its id. */
function clientLabel(g: Grant): string {
  return g.clientName ?? g.clientId;
}

/** The host a grant's client gets its codes at (the whole URI if it does not parse). */
function redirectHost(uri: string): string {
  try {
    return new URL(uri).host;
  } catch {
    return uri;
  }
}

export function GrantsCard({ workspace }: { workspace: string }) {
  const [grants, setGrants] = useState<Grant[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState('');
  const [note, setNote] = useState('');
  const [revoking, setRevoking] = useState<Grant | null>(null);

  const load = async (after: string | null, before: Grant[]): Promise<void> => {
    setError('');
    try {
      const query = after === null ? `limit=${PAGE}` : `limit=${PAGE}&cursor=${encodeURIComponent(after)}`;
      const page = await json<{ grants: Grant[]; nextCursor: string | null }>('GET', `${workspacePath(workspace)}/grants?${query}`);
      setGrants([...before, ...page.grants]);
      setCursor(page.nextCursor);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => {
    setGrants(null);
    void load(null, []);
  }, [workspace]);

  const revoke = async (grant: Grant): Promise<void> => {
    setRevoking(null);
    setNote('');
    try {
      await json('DELETE', `/v1/grants/${encodeURIComponent(grant.id)}`);
      setNote(`The grant of ${clientLabel(grant)} is revoked: its tokens are refused from now on.`);
      setGrants((list) => (list ?? []).filter((g) => g.id !== grant.id));
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <section class="card wide-card" aria-labelledby="grants-title">
      <h2 id="grants-title">OAuth grants</h2>
      <p class="muted">
        Applications a person let read this workspace on the authorization page (MCP clients that connect by OAuth). Each reads what the key that approved it
        may read, until you revoke its grant.
      </p>
      <ErrorLine error={error} />
      {note !== '' && <p role="status">{note}</p>}
      {grants === null && error === '' && <p class="muted">Loading…</p>}
      {grants !== null && grants.length === 0 && (
        <p>No application has access to this workspace through OAuth. One appears here once a person approves it on the authorization page.</p>
      )}
      {grants !== null && grants.length > 0 && (
        <TableBox label="OAuth grants">
          <table>
            <thead>
              <tr>
                <th scope="col">Application</th>
                <th scope="col">Sent back to</th>
                <th scope="col">Claims</th>
                <th scope="col">Approved by</th>
                <th scope="col">Approved</th>
                <th scope="col">Last token</th>
                <th scope="col">Ends</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {grants.map((g) => (
                <tr key={g.id} data-grant={g.id}>
                  <th scope="row">
                    <bdi>{clientLabel(g)}</bdi>
                  </th>
                  <td>
                    <code>{redirectHost(g.redirectUri)}</code>
                  </td>
                  <td>{g.claims.join(', ')}</td>
                  <td>
                    {g.approvedBy.kind === 'management_key' ? 'management key' : 'token'} <code>{g.approvedBy.id}</code>
                  </td>
                  <td>{time(g.createdAt)}</td>
                  <td>{g.lastIssuedAt === null ? 'none yet' : time(g.lastIssuedAt)}</td>
                  <td>{g.expiresAt === null ? 'when revoked' : time(g.expiresAt)}</td>
                  <td>
                    <button type="button" class="danger small" onClick={() => setRevoking(g)} aria-label={`Revoke the grant of ${clientLabel(g)}`}>
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableBox>
      )}
      {cursor !== null && grants !== null && (
        <button type="button" onClick={() => void load(cursor, grants)}>
          Show more grants
        </button>
      )}
      {revoking !== null && (
        <Modal title="Revoke a grant" onClose={() => setRevoking(null)}>
          <p>
            Revoke the grant of <bdi>{clientLabel(revoking)}</bdi>? Its access and refresh tokens are refused from the next request; the application must ask a
            person again.
          </p>
          <div class="row">
            <button type="button" class="danger" onClick={() => void revoke(revoking)}>
              Revoke grant
            </button>
            <button type="button" onClick={() => setRevoking(null)}>
              Cancel
            </button>
          </div>
        </Modal>
      )}
    </section>
  );
}
