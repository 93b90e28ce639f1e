/**
 * A workspace's files: upload (input, folder input, drag and drop of files and folders) with a
 * progress bar per file and one overall, then the files as a tree and as a filterable table,
 * refreshed while ingest runs. A scoped token sees the tree only, as `find` lists it.
 */
import { useMemo, useState } from 'preact/hooks';
import { allFiles, ApiError, type FileEntry, json, tool, upload, workspacePath, encodeFilePath } from './api';
import { bytes, time } from './format';
import { usePoll, workspaceHref } from './route';
import { ErrorLine, Modal, TableBox } from './ui';

/** Files loaded into the page at most (the table says when there are more). */
const MAX_FILES = 5000;
/** Uploads in flight at once. */
const UPLOADS_AT_ONCE = 4;

interface Transfer {
  path: string;
  size: number;
  loaded: number;
  state: 'waiting' | 'sending' | 'done' | 'failed';
  message: string;
}

export function FilesTab({ workspace, readOnly }: { workspace: string; readOnly: boolean }) {
  const [files, setFiles] = useState<FileEntry[] | null>(null);
  const [more, setMore] = useState(false);
  const [error, setError] = useState('');
  const [transfers, setTransfers] = useState<Transfer[]>([]);
  const [tick, setTick] = useState(0);
  const pending = files?.some((f) => f.status === 'pending') ?? false;
  const sending = transfers.some((t) => t.state === 'waiting' || t.state === 'sending');

  const load = async (): Promise<void> => {
    try {
      if (readOnly) {
        const found = await tool(workspace, 'find', { pattern: '**', head_limit: 1000 });
        const paths = found.split('\n').filter((l) => l.startsWith('/'));
        setFiles(paths.map((path) => ({ path, status: 'ready', sizeBytes: 0, contentType: '', updatedAt: '', errorDetail: null })));
        setMore(found.includes('\n['));
      } else {
        const page = await allFiles(workspace, MAX_FILES);
        setFiles(page.files);
        setMore(page.more);
      }
      setError('');
    } catch (e) {
      setError((e as Error).message);
    }
  };
  // Live while anything is pending or being sent; otherwise a slower look for others' uploads.
  usePoll(load, pending || sending ? 1000 : 5000, [workspace, tick, pending || sending]);

  const send = async (items: { path: string; file: File }[]): Promise<void> => {
    const list: Transfer[] = items.map(({ path, file }) => ({ path, size: file.size, loaded: 0, state: 'waiting', message: '' }));
    setTransfers(list);
    const update = (): void => setTransfers([...list]);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < items.length) {
        const i = next++;
        const t = list[i];
        t.state = 'sending';
        update();
        try {
          const status = await upload(workspace, t.path, items[i].file, (loaded) => {
            t.loaded = loaded;
            update();
          });
          t.loaded = t.size;
          t.state = 'done';
          t.message = status;
        } catch (e) {
          t.state = 'failed';
          t.message = e instanceof ApiError ? `${e.status}: ${e.message}` : String(e);
        }
        update();
      }
    };
    await Promise.all(Array.from({ length: Math.min(UPLOADS_AT_ONCE, items.length) }, worker));
    setTick((n) => n + 1);
  };

  return (
    <div>
      {!readOnly && <Uploader onFiles={send} transfers={transfers} />}
      <ErrorLine error={error} />
      {files === null ? (
        <p class="muted">Loading…</p>
      ) : files.length === 0 ? (
        <p class="muted">No file yet.</p>
      ) : (
        <>
          {more && <p class="muted">Only the first {files.length} files are shown.</p>}
          <div class="split">
            <div class="tree-pane">
              <h2>Tree</h2>
              <Tree workspace={workspace} files={files} />
            </div>
            {!readOnly && <FileTable workspace={workspace} files={files} onChanged={() => setTick((n) => n + 1)} />}
          </div>
        </>
      )}
    </div>
  );
}

/** The upload controls and the transfers' progress. */
function Uploader({ onFiles, transfers }: { onFiles: (items: { path: string; file: File }[]) => void; transfers: Transfer[] }) {
  const [folder, setFolder] = useState('/');
  const [over, setOver] = useState(false);
  const prefix = `/${folder.replace(/^\/+|\/+$/g, '')}`.replace(/\/$/, '');
  const take = (list: { relative: string; file: File }[]): void => {
    if (list.length > 0) onFiles(list.map(({ relative, file }) => ({ path: `${prefix}/${relative.replace(/^\/+/, '')}`, file })));
  };
  const fromInput = (input: HTMLInputElement): void => {
    take([...(input.files ?? [])].map((file) => ({ relative: file.webkitRelativePath || file.name, file })));
    input.value = '';
  };
  const drop = async (event: DragEvent): Promise<void> => {
    event.preventDefault();
    setOver(false);
    // The items are readable only during the event itself: take each entry (a folder to walk) or,
    // from a browser that gives no entry, the file, before the first await.
    const dropped = [...(event.dataTransfer?.items ?? [])]
      .filter((item) => item.kind === 'file')
      .map((item) => ({ entry: item.webkitGetAsEntry(), file: item.getAsFile() }));
    const found: { relative: string; file: File }[] = [];
    for (const { entry, file } of dropped) {
      if (entry !== null) await walk(entry, found);
      else if (file !== null) found.push({ relative: file.name, file });
    }
    take(found);
  };
  const total = transfers.reduce((s, t) => s + t.size, 0);
  const loaded = transfers.reduce((s, t) => s + t.loaded, 0);
  const done = transfers.filter((t) => t.state === 'done').length;
  const failed = transfers.filter((t) => t.state === 'failed').length;
  return (
    <section class="card" aria-labelledby="upload-title">
      <h2 id="upload-title">Upload</h2>
      {/* biome-ignore lint/a11y/noStaticElementInteractions: dropping is a shortcut for the pointer; the two file inputs inside are the keyboard's way */}
      <div
        class={over ? 'drop over' : 'drop'}
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={drop}
      >
        <p>Drop files or folders here, or choose them:</p>
        <div class="row wrap">
          <label for="upload-files" class="button">
            Upload files
          </label>
          <input id="upload-files" class="file-input" type="file" multiple onChange={(e) => fromInput(e.currentTarget)} />
          <label for="upload-folder" class="button">
            Upload a folder
          </label>
          <input id="upload-folder" class="file-input" type="file" multiple {...{ webkitdirectory: true }} onChange={(e) => fromInput(e.currentTarget)} />
          <label for="upload-into">Into folder</label>
          <input id="upload-into" value={folder} onInput={(e) => setFolder(e.currentTarget.value)} spellcheck={false} />
        </div>
      </div>
      {transfers.length > 0 && (
        <div class="transfers">
          <label for="overall">
            Overall: {done} of {transfers.length} sent{failed > 0 ? `, ${failed} failed` : ''} ({bytes(loaded)} of {bytes(total)})
          </label>
          <progress id="overall" max={Math.max(total, 1)} value={total === 0 ? (done === transfers.length ? 1 : 0) : loaded} />
          <ul>
            {transfers.map((t) => (
              <li key={t.path} class={t.state === 'failed' ? 'bad' : undefined}>
                <span class="path">{t.path}</span>{' '}
                <progress aria-label={`Upload of ${t.path}`} max={Math.max(t.size, 1)} value={t.size === 0 ? (t.state === 'done' ? 1 : 0) : t.loaded} />{' '}
                <span>{t.state === 'done' ? `sent (${t.message})` : t.state === 'failed' ? `failed: ${t.message}` : t.state}</span>
              </li>
            ))}
          </ul>
        </div>
      )}
    </section>
  );
}

/** Reads a dropped entry: a file, or a folder with everything under it. */
async function walk(entry: FileSystemEntry, found: { relative: string; file: File }[]): Promise<void> {
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    found.push({ relative: entry.fullPath, file });
  } else if (entry.isDirectory) {
    const reader = (entry as FileSystemDirectoryEntry).createReader();
    // readEntries gives a folder's entries in batches until it gives none.
    for (;;) {
      const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
      if (batch.length === 0) break;
      for (const child of batch) await walk(child, found);
    }
  }
}

interface Folder {
  name: string;
  folders: Map<string, Folder>;
  files: FileEntry[];
}

/** The files as nested folders (the platform's <details>: keyboard and screen readers for free). */
function Tree({ workspace, files }: { workspace: string; files: FileEntry[] }) {
  const root = useMemo(() => {
    const top: Folder = { name: '/', folders: new Map(), files: [] };
    for (const f of files) {
      const parts = f.path.split('/').filter((s) => s !== '');
      let at = top;
      for (const part of parts.slice(0, -1)) {
        let sub = at.folders.get(part);
        if (sub === undefined) {
          sub = { name: part, folders: new Map(), files: [] };
          at.folders.set(part, sub);
        }
        at = sub;
      }
      at.files.push(f);
    }
    return top;
  }, [files]);
  return (
    <ul class="tree" aria-label="Files as a tree">
      <FolderItems workspace={workspace} folder={root} />
    </ul>
  );
}

function FolderItems({ workspace, folder }: { workspace: string; folder: Folder }) {
  return (
    <>
      {[...folder.folders.values()]
        .sort((a, b) => a.name.localeCompare(b.name))
        .map((sub) => (
          <li key={`d:${sub.name}`}>
            <details open={sub.folders.size + sub.files.length <= 20}>
              <summary>{sub.name}/</summary>
              <ul>
                <FolderItems workspace={workspace} folder={sub} />
              </ul>
            </details>
          </li>
        ))}
      {folder.files.map((f) => (
        <li key={f.path}>
          <a href={workspaceHref(workspace, 'view', { path: f.path })}>{f.path.split('/').at(-1)}</a>
          {f.status !== 'ready' && <span class={`status ${f.status}`}> {f.status}</span>}
        </li>
      ))}
    </>
  );
}

/** Every loaded file with its state, filtered by path and status; a file can be deleted here. */
function FileTable({ workspace, files, onChanged }: { workspace: string; files: FileEntry[]; onChanged: () => void }) {
  const [filter, setFilter] = useState('');
  const [status, setStatus] = useState('');
  const [error, setError] = useState('');
  const shown = files.filter((f) => (status === '' || f.status === status) && f.path.toLowerCase().includes(filter.toLowerCase()));
  const [deleting, setDeleting] = useState<string | null>(null);
  const remove = async (path: string): Promise<void> => {
    setDeleting(null);
    try {
      await json('DELETE', `${workspacePath(workspace)}/files/${encodeFilePath(path)}`);
      onChanged();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const counts = { pending: 0, ready: 0, error: 0 };
  for (const f of files) counts[f.status]++;
  return (
    <div class="table-pane">
      <h2>Files</h2>
      <p class="muted" aria-live="polite">
        {counts.ready} ready, {counts.pending} pending, {counts.error} in error
      </p>
      <div class="row wrap">
        <label for="file-filter">Filter</label>
        <input id="file-filter" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} spellcheck={false} />
        <label for="file-status">Status</label>
        <select id="file-status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
          <option value="">any</option>
          <option value="ready">ready</option>
          <option value="pending">pending</option>
          <option value="error">error</option>
        </select>
      </div>
      <ErrorLine error={error} />
      <TableBox label="Files as a table">
        <table>
          <thead>
            <tr>
              <th scope="col">Path</th>
              <th scope="col">Status</th>
              <th scope="col" class="num">
                Size
              </th>
              <th scope="col">Content type</th>
              <th scope="col">Error detail</th>
              <th scope="col">Updated</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {shown.map((f) => (
              <tr key={f.path} data-status={f.status}>
                <th scope="row" class="path">
                  <a href={workspaceHref(workspace, 'view', { path: f.path })}>{f.path}</a>
                </th>
                <td>
                  <span class={`status ${f.status}`}>{f.status}</span>
                </td>
                <td class="num">{bytes(f.sizeBytes)}</td>
                <td>{f.contentType}</td>
                <td class="detail">{f.errorDetail ?? ''}</td>
                <td>{time(f.updatedAt)}</td>
                <td>
                  <button type="button" class="danger small" onClick={() => setDeleting(f.path)} aria-label={`Delete ${f.path}`}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableBox>
      {deleting !== null && (
        <Modal title="Delete a file" onClose={() => setDeleting(null)}>
          <p>
            Delete <code>{deleting}</code>? Agents no longer see it once the call returns.
          </p>
          <div class="row">
            <button type="button" class="danger" onClick={() => void remove(deleting)}>
              Delete file
            </button>
            <button type="button" onClick={() => setDeleting(null)}>
              Cancel
            </button>
          </div>
        </Modal>
      )}
    </div>
  );
}
