/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, the MCP
 * authorization spec's preferred registration): a `client_id` that is an https URL names a JSON
 * document the client publishes there, which this module fetches, checks and caches. The
 * document holds what a registration would (register.ts checks it the same way) and its own URL
 * as `client_id`.
 *
 * SECURITY: anyone can make the service fetch a URL of their choosing (SSRF), so every guard is
 * here, in one place:
 * - the URL: https, a path, no fragment, no user information, written as the URL parser would
 *   write it (so no dot segments, and one document has one spelling);
 * - the address: the host is resolved first, and the fetch is refused when ANY address it
 *   resolves to is in `BLOCKED` (loopback, private, link-local with the cloud metadata address,
 *   CGNAT, unspecified, multicast, reserved, unique-local, and IPv4 ranges embedded in IPv6).
 *   The connection is then made to the addresses checked (the socket's `lookup` answers them),
 *   so a second DNS answer cannot switch it elsewhere (DNS rebinding). With `allowPrivate` (an
 *   intranet deployment) loopback, private, CGNAT and unique-local addresses are allowed;
 *   link-local, unspecified, multicast and reserved ones never are;
 * - the exchange: no redirect followed, one time limit for all of it (DNS, connection, TLS,
 *   headers and body), a body limit past which reading stops (never buffered beyond it), and a
 *   JSON content type;
 * - the rate: each URL's outcome is cached, a document within Cache-Control max-age clamped to
 *   [CACHE_FLOOR_MS, CACHE_CEILING_MS], a failure FAILURE_CACHE_MS, so a hostile URL cannot make
 *   the service fetch in a loop; concurrent requests for one URL share one fetch, and the cache
 *   holds at most `maxEntries` URLs (the oldest go first); at most `maxFetches` run at once.
 */
import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import type { IncomingMessage } from 'node:http';
import { request } from 'node:https';
import { BlockList, isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { VfsError } from '../../core/errors.js';
import type { OAuthClient } from '../../db/oauth.js';
import { clientMetadata } from './client-metadata.js';

/** How client documents are fetched. */
export interface ClientDocumentOptions {
  /** Allow loopback, private (RFC 1918), CGNAT and unique-local addresses: an intranet deployment, or tests. Default false. */
  allowPrivate?: boolean;
  /** PEM certificates trusted besides the system's roots (an intranet CA); undefined: the system's roots and NODE_EXTRA_CA_CERTS. */
  ca?: string;
  /** The whole fetch, DNS to the body's last byte, ms. Default 5,000. */
  timeoutMs?: number;
  /** The largest document, bytes. Default 64 KiB. */
  maxBytes?: number;
  /** URLs whose outcome is cached at once. Default 1,000. */
  maxEntries?: number;
  /** Fetches under way at once; past it a new URL is refused for now (not cached). Default 16. */
  maxFetches?: number;
}

/** Shortest and longest a fetched document is cached, whatever its Cache-Control says. */
export const CACHE_FLOOR_MS = 5 * 60_000;
export const CACHE_CEILING_MS = 24 * 3600_000;
/** How long a URL that failed is not fetched again. */
export const FAILURE_CACHE_MS = 60_000;
/** Longest client_id URL. */
export const MAX_DOCUMENT_URL = 2000;

const DEFAULTS = { allowPrivate: false, timeoutMs: 5000, maxBytes: 64 * 1024, maxEntries: 1000, maxFetches: 16 } as const;

/** True when `clientId` is meant as a document URL (an http one too: it is refused with a reason, not looked up as registered). */
export function isDocumentClientId(clientId: string): boolean {
  return /^https?:/i.test(clientId);
}

/** Why `raw` cannot be a client document's URL, or null when it can. */
export function documentUrlProblem(raw: string): string | null {
  if (raw.length > MAX_DOCUMENT_URL) return `a client_id URL has at most ${MAX_DOCUMENT_URL} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'the client_id is not a URL';
  }
  if (url.protocol !== 'https:') return 'a client_id URL must be https';
  if (raw.includes('#')) return 'a client_id URL must not have a fragment';
  if (url.username !== '' || url.password !== '') return 'a client_id URL must not carry user information';
  if (url.pathname === '/') return 'a client_id URL must have a path';
  // Dot segments, an upper-case host, a default port, escapes written otherwise: each would give one document two names.
  if (url.href !== raw) return `a client_id URL must be written as ${url.href.slice(0, 200)} is`;
  return null;
}

/** Fetches, checks and caches client documents (see the module comment). */
export class ClientDocuments {
  private readonly options: Required<Omit<ClientDocumentOptions, 'ca'>> & { ca: string | undefined };
  private readonly blocked: BlockList;
  /** Each URL's outcome, while its fetch runs and then until `until`; a Map keeps insertion order, oldest first. */
  private readonly cache = new Map<string, { until: number; client: Promise<OAuthClient | VfsError> }>();
  /** Fetches under way. */
  private fetching = 0;

  constructor(options: ClientDocumentOptions = {}) {
    this.options = { ...DEFAULTS, ...stripUndefined(options), ca: options.ca };
    this.blocked = blockList(this.options.allowPrivate);
  }

  /**
   * The client the document at `url` describes; throws OAUTH_CLIENT_DOCUMENT (invalid_client)
   * saying why when it cannot be used.
   */
  async client(url: string): Promise<OAuthClient> {
    const problem = documentUrlProblem(url);
    if (problem !== null) throw documentError(url, problem);
    const now = Date.now();
    let hit = this.cache.get(url);
    if (hit === undefined || hit.until <= now) {
      // SECURITY: bounded work. Many new URLs at once (each may take the whole time limit) are refused, not queued.
      if (this.fetching >= this.options.maxFetches) throw documentError(url, 'too many client documents are being fetched at once; try again shortly');
      this.fetching++;
      const loading = this.load(url);
      // Kept while the fetch runs (callers share it), then as long as the outcome says.
      const entry = { until: Number.POSITIVE_INFINITY, client: loading.then((outcome) => outcome.client) };
      void loading.then((outcome) => {
        this.fetching--;
        entry.until = Date.now() + outcome.keepMs;
      });
      this.cache.delete(url); // re-inserted last: the oldest entries are evicted first
      this.cache.set(url, entry);
      while (this.cache.size > this.options.maxEntries) this.cache.delete(this.cache.keys().next().value!);
      hit = entry;
    }
    const client = await hit.client;
    if (client instanceof VfsError) throw client;
    return client;
  }

  /** The document's client, or why there is none, and how long to keep that. Never throws. */
  private async load(url: string): Promise<{ client: OAuthClient | VfsError; keepMs: number }> {
    try {
      const { body, maxAgeMs } = await this.fetch(new URL(url));
      return { client: documentClient(url, body), keepMs: Math.min(CACHE_CEILING_MS, Math.max(CACHE_FLOOR_MS, maxAgeMs ?? 0)) };
    } catch (error) {
      const reason = error instanceof VfsError ? error : documentError(url, error instanceof Error ? error.message : String(error));
      return { client: reason, keepMs: FAILURE_CACHE_MS };
    }
  }

  /** The document's bytes and its max-age, or a thrown reason. */
  private async fetch(url: URL): Promise<{ body: Buffer; maxAgeMs: number | null }> {
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    const limitMessage = `no answer within ${this.options.timeoutMs / 1000} s`;
    const addresses = await untilAborted(this.resolve(url.hostname), signal, limitMessage);
    const response = await untilAborted(this.get(url, addresses, signal), signal, limitMessage);
    return { body: await this.readBody(response, signal, limitMessage), maxAgeMs: maxAge(response.headers['cache-control']) };
  }

  /** The addresses `host` resolves to, each one allowed; throws naming the first that is not. */
  private async resolve(host: string): Promise<LookupAddress[]> {
    const literal = host.startsWith('[') ? host.slice(1, -1) : host;
    const family = isIP(literal);
    let addresses: LookupAddress[];
    if (family !== 0) addresses = [{ address: literal, family }];
    else {
      try {
        addresses = await lookup(literal, { all: true, verbatim: true });
      } catch {
        throw new Error(`its host ${host} does not resolve`);
      }
    }
    // SECURITY: SSRF. Every address the name resolves to must be allowed, not only the one a connection would try first.
    for (const a of addresses) {
      if (this.blocked.check(a.address, a.family === 6 ? 'ipv6' : 'ipv4')) {
        throw new Error(`its host ${host} resolves to ${a.address}, an address this service does not fetch from (loopback, private, link-local or reserved)`);
      }
    }
    if (addresses.length === 0) throw new Error(`its host ${host} does not resolve`);
    return addresses;
  }

  /** Sends the GET to the vetted addresses and waits for the response's head. */
  private get(url: URL, addresses: LookupAddress[], signal: AbortSignal): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = request(url, {
        method: 'GET',
        headers: { accept: 'application/json', 'user-agent': 'agent-vfs' },
        // SECURITY: DNS rebinding. The socket connects to the addresses just checked, whatever a new lookup would say.
        lookup: (_host, options, callback) => {
          if ((options as { all?: boolean }).all === true) (callback as (e: null, a: LookupAddress[]) => void)(null, addresses);
          else callback(null, addresses[0].address, addresses[0].family);
        },
        agent: false,
        signal,
        // A `ca` replaces Node's roots: the configured CA is trusted beside them, not instead.
        ...(this.options.ca === undefined ? {} : { ca: [...rootCertificates, this.options.ca] }),
      });
      req.on('response', resolve);
      req.on('error', (error) => reject(new Error(signal.aborted ? 'no answer in time' : `fetching it failed: ${error.message}`)));
      req.end();
    });
  }

  /** The body of a 200 JSON answer, at most maxBytes: reading stops (and the connection closes) past it. */
  private readBody(response: IncomingMessage, signal: AbortSignal, limitMessage: string): Promise<Buffer> {
    const max = this.options.maxBytes;
    const refuse = (reason: string): Promise<never> => {
      response.destroy();
      return Promise.reject(new Error(reason));
    };
    const status = response.statusCode ?? 0;
    // SECURITY: no redirect is followed: the client_id must be where the document is.
    if (status >= 300 && status < 400) return refuse(`it answered a redirect (${status}), which is not followed`);
    if (status !== 200) return refuse(`it answered ${status}, not 200`);
    if (!/^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i.test(response.headers['content-type'] ?? '')) return refuse('its content type is not application/json');
    if (Number(response.headers['content-length'] ?? 0) > max) return refuse(`it is larger than ${max} bytes`);
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > max) {
          response.destroy();
          reject(new Error(`it is larger than ${max} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      response.on('end', () => resolve(Buffer.concat(chunks)));
      response.on('error', () => reject(new Error(signal.aborted ? limitMessage : 'the connection broke while reading it')));
      response.on('close', () => {
        if (!response.complete) reject(new Error(signal.aborted ? limitMessage : 'the connection broke while reading it'));
      });
    });
  }
}

/** The client a fetched document describes, or a thrown OAUTH_CLIENT_DOCUMENT saying what is wrong with it. */
function documentClient(url: string, body: Buffer): OAuthClient {
  let input: unknown;
  try {
    input = JSON.parse(body.toString('utf8'));
  } catch {
    throw documentError(url, 'it is not JSON');
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw documentError(url, 'it is not a JSON object');
  const m = input as Record<string, unknown>;
  // SECURITY: the document must name itself: one at another URL cannot be passed off as this client.
  if (m.client_id !== url) throw documentError(url, 'its client_id is not its own URL');
  if (m.client_secret !== undefined || m.client_secret_expires_at !== undefined) throw documentError(url, 'it must not hold a client secret');
  if (typeof m.client_name !== 'string' || m.client_name === '') throw documentError(url, 'it has no client_name');
  try {
    const metadata = clientMetadata(m);
    return { id: url, name: metadata.clientName, redirectUris: metadata.redirectUris, createdAt: new Date() };
  } catch (error) {
    if (error instanceof VfsError) throw documentError(url, error.message);
    throw error;
  }
}

/** The addresses never fetched from (`allowPrivate` lifts the private ones), IPv4 ranges also as embedded in IPv6. */
function blockList(allowPrivate: boolean): BlockList {
  const list = new BlockList();
  const ipv4: Array<[string, number, boolean]> = [
    // [network, prefix, private: allowed with allowPrivate]
    ['0.0.0.0', 8, false], // "this network", unspecified
    ['10.0.0.0', 8, true],
    ['100.64.0.0', 10, true], // CGNAT
    ['127.0.0.0', 8, true], // loopback
    ['169.254.0.0', 16, false], // link-local: cloud metadata (169.254.169.254)
    ['172.16.0.0', 12, true],
    ['192.0.0.0', 24, false], // IETF protocol assignments
    ['192.0.2.0', 24, false], // documentation
    ['192.88.99.0', 24, false], // 6to4 relay anycast
    ['192.168.0.0', 16, true],
    ['198.18.0.0', 15, false], // benchmarking
    ['198.51.100.0', 24, false],
    ['203.0.113.0', 24, false],
    ['224.0.0.0', 4, false], // multicast
    ['240.0.0.0', 4, false], // reserved, broadcast
  ];
  for (const [net, prefix, isPrivate] of ipv4) {
    if (isPrivate && allowPrivate) continue;
    list.addSubnet(net, prefix, 'ipv4');
    // The same addresses reached as IPv4-mapped (::ffff:a.b.c.d) or through NAT64 (64:ff9b::a.b.c.d).
    list.addSubnet(`::ffff:${net}`, 96 + prefix, 'ipv6');
    list.addSubnet(`64:ff9b::${net}`, 96 + prefix, 'ipv6');
  }
  const ipv6: Array<[string, number, boolean]> = [
    ['::', 128, false], // unspecified
    ['::1', 128, true], // loopback
    ['100::', 64, false], // discard
    ['2001::', 32, false], // Teredo: embeds an IPv4 address
    ['2001:db8::', 32, false], // documentation
    ['2002::', 16, false], // 6to4: embeds an IPv4 address
    ['fc00::', 7, true], // unique local
    ['fe80::', 10, false], // link-local
    ['fec0::', 10, false], // site-local (deprecated)
    ['ff00::', 8, false], // multicast
  ];
  for (const [net, prefix, isPrivate] of ipv6) if (!(isPrivate && allowPrivate)) list.addSubnet(net, prefix, 'ipv6');
  return list;
}

/** Cache-Control max-age in ms, or null when absent (no-store and no-cache count as 0). */
function maxAge(header: string | undefined): number | null {
  if (header === undefined) return null;
  if (/(?:^|,)\s*no-(?:store|cache)\s*(?:,|$)/i.test(header)) return 0;
  const m = /(?:^|,)\s*max-age\s*=\s*"?(\d{1,10})"?\s*(?:,|$)/i.exec(header);
  return m === null ? null : Number(m[1]) * 1000;
}

/** `work`, or a rejection with `message` once `signal` aborts. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal, message: string): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error(message));
  return new Promise((resolve, reject) => {
    const abort = (): void => reject(new Error(message));
    signal.addEventListener('abort', abort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

function documentError(url: string, reason: string): VfsError {
  return new VfsError('OAUTH_CLIENT_DOCUMENT', { url: url.slice(0, 200), reason });
}

function stripUndefined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>;
}
