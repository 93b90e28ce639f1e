/** The account's workspaces: what each holds, create one, delete one (typing its name). */
import { useState } from 'preact/hooks';
import { json, type Status, type WorkspaceStatus, workspacePath } from './api';
import { bytes, count, time } from './format';
import { usePoll, workspaceHref } from './route';
import { ErrorLine, Modal, TableBox } from './ui';

export function WorkspacesPage() {
  const [rows, setRows] = useState<WorkspaceStatus[] | null>(null);
  const [error, setError] = useState('');
  const [name, setName] = useState('');
  const [createError, setCreateError] = useState('');
  const [deleting, setDeleting] = useState<string | null>(null);
  const [tick, setTick] = useState(0);

  const load = async (): Promise<void> => {
    try {
      setRows((await json<Status>('GET', '/v1/status')).workspaces);
      setError('');
    } catch (e) {
      setError((e as Error).message);
    }
  };
  usePoll(load, 3000, [tick]);

  const create = async (event: Event): Promise<void> => {
    event.preventDefault();
    setCreateError('');
    try {
      await json('POST', '/v1/workspaces', { name: name.trim() });
      setName('');
      setTick(tick + 1);
    } catch (e) {
      setCreateError((e as Error).message);
    }
  };

  return (
    <section aria-labelledby="workspaces-title">
      <h1 id="workspaces-title">Workspaces</h1>
      <form class="row" onSubmit={create}>
        <label for="new-workspace">Workspace name</label>
        <input
          id="new-workspace"
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
          pattern="[a-z0-9](?:[a-z0-9_\-]{0,62}[a-z0-9])?"
          title="1-64 lowercase letters, digits, hyphens or underscores, starting and ending with a letter or digit"
          required
        />
        <button type="submit">Create workspace</button>
      </form>
      <ErrorLine error={createError} />
      <ErrorLine error={error} />
      {rows === null ? (
        <p class="muted">Loading…</p>
      ) : rows.length === 0 ? (
        <p class="muted">No workspace yet: create one above.</p>
      ) : (
        <TableBox label="Workspaces">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col" class="num">
                  Files
                </th>
                <th scope="col" class="num">
                  Bytes
                </th>
                <th scope="col" class="num">
                  Ready
                </th>
                <th scope="col" class="num">
                  Pending
                </th>
                <th scope="col" class="num">
                  Error
                </th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((w) => (
                <tr key={w.name}>
                  <th scope="row">
                    <a href={workspaceHref(w.name)}>{w.name}</a>
                  </th>
                  <td class="num">{count(w.files)}</td>
                  <td class="num">{bytes(w.bytes)}</td>
                  <td class="num">{count(w.ready)}</td>
                  <td class="num">{count(w.pending)}</td>
                  <td class={w.error > 0 ? 'num bad' : 'num'}>{count(w.error)}</td>
                  <td>{time(w.createdAt)}</td>
                  <td>
                    <button type="button" class="danger small" onClick={() => setDeleting(w.name)} aria-label={`Delete workspace ${w.name}`}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableBox>
      )}
      {deleting !== null && (
        <DeleteWorkspace
          name={deleting}
          onDone={() => {
            setDeleting(null);
            setTick(tick + 1);
          }}
        />
      )}
    </section>
  );
}

function DeleteWorkspace({ name, onDone }: { name: string; onDone: () => void }) {
  const [typed, setTyped] = useState('');
  const [error, setError] = useState('');
  const remove = async (event: Event): Promise<void> => {
    event.preventDefault();
    try {
      await json('DELETE', workspacePath(name));
      onDone();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <Modal title={`Delete workspace ${name}`} onClose={onDone}>
      <form method="dialog" onSubmit={remove}>
        <p>Its files, tokens and audit log are deleted for good. Type the workspace's name to confirm.</p>
        <label for="confirm-name">Workspace name to delete</label>
        <input id="confirm-name" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autocomplete="off" />
        <ErrorLine error={error} />
        <div class="row">
          <button type="submit" class="danger" disabled={typed !== name}>
            Delete for good
          </button>
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        </div>
      </form>
    </Modal>
  );
}
