/**
 * The operator console's files under /console/: what `npm run build` made of console/ (Vite)
 * in dist/console/, each text file beside its brotli (`.br`) and gzip (`.gz`) forms. They are
 * read into memory once, at registration (the whole console is well under a megabyte), so a
 * request costs a map lookup and never a disk read or a compression.
 *
 * Caching: the assets under assets/ carry their content's hash in their names, so they are
 * cached for a year and never asked again; index.html (and any other file) is revalidated on
 * each load, by its ETag. A coding gets its own strong ETag (the SHA-256 prefix of the
 * identity bytes, with `-br` or `-gzip` appended), as RFC 9110 8.8.3 asks of two
 * representations. Every answer under /console, errors and redirects included, carries the
 * security headers: the page runs under a CSP with no inline script or style and may not be
 * framed.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { VfsError } from '../core/errors.js';
import { FROM_SOURCE } from '../core/run-mode.js';
import { type RequestContext, send, sendJson, snapshot } from './http/context.js';

/**
 * The built console: dist/console beside the compiled api/; run from source (the tests), the
 * current build's, which `npm run build` made (test/global-setup.ts builds first).
 */
export const CONSOLE_DIR = fileURLToPath(new URL(FROM_SOURCE ? '../dist/console/' : '../console/', import.meta.url));

/** The console's path prefix. */
const BASE = '/console/';

/** What every page the service serves carries besides its own CSP (the console's, the authorization page): no referrer, no sniffing, no framing, no opener. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
});

/** The headers of every answer under /console. */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  ...PAGE_HEADERS,
});

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webp': 'image/webp',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** Assets named by their hash: never change under their name. */
const IMMUTABLE = 'public, max-age=31536000, immutable';
/** Everything else: kept, but asked again (a 304 when unchanged) at each use. */
const REVALIDATE = 'no-cache';

/** One coding of a file. */
interface Form {
  /** The Content-Encoding, or null for the identity. */
  coding: 'br' | 'gzip' | null;
  body: Buffer;
  etag: string;
}

/** A file of the console, in every coding it was built in. */
interface ConsoleFile {
  contentType: string;
  cacheControl: string;
  identity: Form;
  br: Form | null;
  gzip: Form | null;
}

/**
 * Registers /console and everything under it on `app`: the files of `dir` (CONSOLE_DIR by
 * default), or a 404 saying the console was not built when `dir` does not exist. Returns whether
 * the console is served.
 */
export function registerConsoleRoutes(app: TemplatedApp, dir: string = CONSOLE_DIR): boolean {
  const files = existsSync(join(dir, 'index.html')) ? loadFiles(dir) : null;
  const redirect = (res: HttpResponse, req: HttpRequest): void => {
    const ctx = snapshot(res, req, 0);
    if (!allowed(ctx)) return;
    send(ctx, 308, 'text/plain; charset=utf-8', `${BASE}\n`, { location: BASE, ...CONSOLE_HEADERS });
  };
  const serve = (res: HttpResponse, req: HttpRequest): void => {
    const ctx = snapshot(res, req, 0);
    if (!allowed(ctx)) return;
    if (files === null) {
      notFound(ctx, new VfsError('CONSOLE_NOT_BUILT'));
      return;
    }
    const file = files.get(ctx.url === BASE ? `${BASE}index.html` : ctx.url);
    if (file === undefined) {
      notFound(ctx, new VfsError('NO_SUCH_ROUTE', { method: ctx.method, url: ctx.url.slice(0, 200) }));
      return;
    }
    let acceptEncoding = '';
    let ifNoneMatch = '';
    req.forEach((name, value) => {
      if (name === 'accept-encoding') acceptEncoding = acceptEncoding === '' ? value : `${acceptEncoding},${value}`;
      else if (name === 'if-none-match') ifNoneMatch = ifNoneMatch === '' ? value : `${ifNoneMatch},${value}`;
    });
    const form = chooseForm(file, acceptEncoding);
    const headers: Record<string, string> = { ...CONSOLE_HEADERS, 'cache-control': file.cacheControl, etag: form.etag };
    if (file.br !== null || file.gzip !== null) headers.vary = 'Accept-Encoding';
    if (matches(ifNoneMatch, form.etag)) {
      send(ctx, 304, null, '', headers);
      return;
    }
    if (form.coding !== null) headers['content-encoding'] = form.coding;
    send(ctx, 200, file.contentType, form.body, headers);
  };
  app.any('/console', redirect);
  app.any('/console/*', serve);
  return files !== null;
}

/** GET and HEAD pass; any other method is answered 405 here (false). */
function allowed(ctx: RequestContext): boolean {
  if (ctx.method === 'GET' || ctx.method === 'HEAD') return true;
  const error = new VfsError('METHOD_NOT_ALLOWED', { method: ctx.method, allow: 'GET, HEAD' });
  sendJson(ctx, error.status, { error: error.message }, { allow: 'GET, HEAD', ...CONSOLE_HEADERS });
  return false;
}

function notFound(ctx: RequestContext, error: VfsError): void {
  sendJson(ctx, error.status, { error: error.message }, { 'cache-control': REVALIDATE, ...CONSOLE_HEADERS });
}

/** Every file of the built console by its URL path, with its compressed forms where they are smaller. */
function loadFiles(dir: string): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || /\.(?:br|gz)$/.test(entry.name)) continue;
    const path = join(entry.parentPath, entry.name);
    const urlPath = BASE + relative(dir, path).split(sep).join('/');
    const body = readFileSync(path);
    const tag = createHash('sha256').update(body).digest('base64url').slice(0, 22);
    const variant = (coding: 'br' | 'gzip', suffix: string): Form | null => {
      const compressed = existsSync(path + suffix) ? readFileSync(path + suffix) : null;
      return compressed !== null && compressed.length < body.length ? { coding, body: compressed, etag: `"${tag}-${coding}"` } : null;
    };
    const extension = /\.[^./]+$/.exec(entry.name)?.[0] ?? '';
    files.set(urlPath, {
      contentType: CONTENT_TYPES[extension] ?? 'application/octet-stream',
      cacheControl: urlPath.startsWith(`${BASE}assets/`) ? IMMUTABLE : REVALIDATE,
      identity: { coding: null, body, etag: `"${tag}"` },
      br: variant('br', '.br'),
      gzip: variant('gzip', '.gz'),
    });
  }
  return files;
}

/**
 * The form to send for an Accept-Encoding header (RFC 9110 12.5.3): the acceptable coding of
 * highest weight, brotli before gzip at equal weight, `*` standing for a coding not named, a
 * weight of 0 refusing it; the identity when none is acceptable or the header is absent.
 */
function chooseForm(file: ConsoleFile, header: string): Form {
  if (header === '') return file.identity;
  let star: number | null = null;
  let br: number | null = null;
  let gzip: number | null = null;
  for (const part of header.split(',')) {
    const [name, ...params] = part.split(';');
    const coding = name.trim().toLowerCase();
    let weight = 1;
    for (const param of params) {
      const q = /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(param);
      if (q !== null) weight = Number(q[1]);
    }
    if (coding === 'br') br = weight;
    else if (coding === 'gzip' || coding === 'x-gzip') gzip = weight;
    else if (coding === '*') star = weight;
  }
  const brWeight = file.br === null ? 0 : (br ?? star ?? 0);
  const gzipWeight = file.gzip === null ? 0 : (gzip ?? star ?? 0);
  if (brWeight > 0 && brWeight >= gzipWeight) return file.br!;
  if (gzipWeight > 0) return file.gzip!;
  return file.identity;
}

/** Whether an If-None-Match header names `etag` (weak comparison, as RFC 9110 13.1.2 asks), or is `*`. */
function matches(header: string, etag: string): boolean {
  if (header === '') return false;
  for (const part of header.split(',')) {
    const tag = part.trim();
    if (tag === '*' || tag === etag || tag === `W/${etag}`) return true;
  }
  return false;
}
