/**
 * The console's only way to the service: the public /v1 API, same origin, with the signed-in
 * credential as a bearer token. So the console can never do what the API would refuse.
 */
import { contentTypeOf } from '../../core/content-types';
import { currentCredential } from './session';

/** A refusal from the service: its status and its message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Fired when the service says the credential is no longer good (401). */
export const signedOutEvent = new EventTarget();

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const credential = currentCredential();
  return credential === null ? extra : { ...extra, authorization: `Bearer ${credential}` };
}

async function failure(response: Response): Promise<ApiError> {
  const text = await response.text();
  let message = text.trim();
  try {
    const body = JSON.parse(text) as { error?: unknown };
    if (typeof body.error === 'string') message = body.error;
  } catch {
    // read routes answer plain text
  }
  if (response.status === 401) signedOutEvent.dispatchEvent(new Event('signed-out'));
  const retry = response.headers.get('retry-after');
  return new ApiError(response.status, `${message || response.statusText}${retry === null ? '' : ` (retry in ${retry} s)`}`);
}

/** A JSON call; resolves to the parsed body (undefined for 204). */
export async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(path, {
    method,
    headers: headers(body === undefined ? {} : { 'content-type': 'application/json' }),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return (response.status === 204 ? undefined : await response.json()) as T;
}

/** A read tool's plain-text answer. */
export async function tool(
  workspace: string,
  name: 'ls' | 'find' | 'cat' | 'grep',
  params: Record<string, string | number | boolean | undefined>,
): Promise<string> {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '' && v !== false) query.set(k, String(v));
  const response = await fetch(`${workspacePath(workspace)}/${name}?${query}`, { headers: headers() });
  if (!response.ok) throw await failure(response);
  return response.text();
}

/** /v1/workspaces/{ws}. */
export function workspacePath(workspace: string): string {
  return `/v1/workspaces/${encodeURIComponent(workspace)}`;
}

/** A file's path in a URL: each segment encoded, the slashes kept. */
export function encodeFilePath(path: string): string {
  return path.replace(/^\/+/, '').split('/').map(encodeURIComponent).join('/');
}

/**
 * Uploads one file with progress (fetch cannot report an upload's progress; XMLHttpRequest
 * can). Resolves to the status the service gave the file.
 */
export function upload(workspace: string, path: string, file: Blob, onProgress: (loaded: number) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `${workspacePath(workspace)}/files/${encodeFilePath(path)}`);
    for (const [k, v] of Object.entries(headers())) xhr.setRequestHeader(k, v);
    xhr.setRequestHeader('content-type', contentTypeOf(path));
    xhr.upload.onprogress = (event) => onProgress(event.loaded);
    xhr.onerror = () => reject(new ApiError(0, 'the connection failed'));
    xhr.onload = () => {
      let message = xhr.responseText;
      try {
        const body = JSON.parse(xhr.responseText) as { status?: string; error?: string };
        if (xhr.status === 202) return resolve(body.status ?? 'pending');
        message = body.error ?? message;
      } catch {
        // not JSON
      }
      if (xhr.status === 401) signedOutEvent.dispatchEvent(new Event('signed-out'));
      reject(new ApiError(xhr.status, message || `HTTP ${xhr.status}`));
    };
    xhr.send(file);
  });
}

/** A file as the listing gives it (SPEC.md section 2). */
export interface FileEntry {
  path: string;
  status: 'pending' | 'ready' | 'error';
  sizeBytes: number;
  contentType: string;
  updatedAt: string;
  errorDetail: string | null;
}

/** A workspace's row in GET /v1/status. */
export interface WorkspaceStatus {
  name: string;
  createdAt: string;
  files: number;
  bytes: number;
  ready: number;
  pending: number;
  error: number;
}

/** GET /v1/status. */
export interface Status {
  workspaces: WorkspaceStatus[];
  ingest: { pending: number; oldestPendingSeconds: number; finished: { at: string; ready: number; error: number }[] };
  reads: { slotSeconds: number; slots: { at: string; tools: Record<string, { count: number; p99Ms: number }> }[] };
  nodes: { id: string; state: string; alive: boolean; seenAt: string; copies: number; versionsBehind: number }[];
}

/** An audit event (SPEC.md section 2). */
export interface AuditEvent {
  id: number;
  actorType: string;
  actorId: string;
  tool: string;
  params: unknown;
  resultCount: number | null;
  latencyMs: number | null;
  ts: string;
}

/** Every file of a workspace, page by page (at most `max`). */
export async function allFiles(workspace: string, max: number): Promise<{ files: FileEntry[]; more: boolean }> {
  const files: FileEntry[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor === null ? 'limit=1000' : `limit=1000&cursor=${encodeURIComponent(cursor)}`;
    const page: { files: FileEntry[]; nextCursor: string | null } = await json('GET', `${workspacePath(workspace)}/files?${query}`);
    files.push(...page.files);
    cursor = page.nextCursor;
  } while (cursor !== null && files.length < max);
  return { files, more: cursor !== null };
}
