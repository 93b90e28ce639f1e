/**
 * The HTTP server: probes, the management plane, the read tools, the operator
 * console and the two routes it needs beside the API, and a JSON 404 for
 * everything else. Requests are counted (http/in-flight.ts) so that a stop lets
 * those in flight finish.
 */
import type { HttpRequest, HttpResponse, us_listen_socket } from 'uWebSockets.js';
import { VfsError } from '../core/errors.js';
import type { Database } from '../db/database.js';
import { type ConsoleApiDeps, registerConsoleApiRoutes } from './console-api.js';
import { registerConsoleRoutes } from './console-routes.js';
import { send, sendJson, sendText, snapshot } from './http/context.js';
import { type FileRouteDeps, registerFileRoutes } from './file-routes.js';
import { InFlight } from './http/in-flight.js';
import { type ManagementDeps, registerManagementRoutes } from './management-routes.js';
import { type McpRouteDeps, registerMcpRoutes } from './mcp/routes.js';
import { type OAuthDeps, type ProtectedResourceDeps, registerOAuthRoutes, registerProtectedResource } from './oauth/routes.js';
import { openApiDocument } from './contract/openapi.js';
import { type ReadRouteDeps, registerReadRoutes } from './read-routes.js';
import { sendJsonError } from './http/respond.js';
import { type HttpChoice, loadUws } from './http/uws.js';

/**
 * uWS's LIBUS_LISTEN_EXCLUSIVE_PORT. Without it this build binds with SO_REUSEPORT, and a
 * second service started on the same port (on another data directory, say) would listen
 * beside the first and silently get part of its connections.
 */
const EXCLUSIVE_PORT = 1;

/** What the server needs from the rest of the service. */
export interface ServerDeps extends ManagementDeps, FileRouteDeps, ReadRouteDeps, McpRouteDeps, ConsoleApiDeps {
  db: Database;
  /** Writes one line per request (method, route, status, milliseconds, request id); null: none. */
  requestLog: ((fields: Record<string, unknown>) => void) | null;
  /** False while this node drains or its object store does not answer (GET /readyz says 503). */
  ready: () => boolean;
  /** The OAuth routes' own needs (VFS_OAUTH=on), or null: the built-in authorization server is off. */
  oauth: Pick<OAuthDeps, 'publicUrl' | 'options' | 'csrf' | 'documents'> | null;
  /** The protected-resource metadata (VFS_OAUTH=on or VFS_OAUTH_ISSUER set), or null: none is served. */
  protectedResource: Omit<ProtectedResourceDeps, 'log'> | null;
}

/** A listening server. */
export interface RunningServer {
  port: number;
  /** Which HTTP implementation serves, and why the ones tried before it did not load (api/http/uws.ts). */
  http: string;
  /** Whether the operator console is served at /console/ (false: it was not built). */
  console: boolean;
  /**
   * Stops accepting connections, answers 503 to new requests on connections
   * already open, and resolves once the requests in flight have finished, or
   * after `graceMs`, to the number still in flight then.
   */
  close(graceMs: number): Promise<number>;
}

/** Starts listening on host:port (port 0 picks a free port), on the HTTP implementation `http` picks (see Config). */
export async function startServer(deps: ServerDeps, host: string, port: number, http: HttpChoice = 'node'): Promise<RunningServer> {
  const { uws, description } = loadUws(http);
  const metrics = deps.metrics;
  const requestLog = deps.requestLog;
  const inFlight = new InFlight(
    metrics === null && requestLog === null
      ? null
      : (method, route, status, ms, requestId) => {
          metrics?.requests.inc({ method, route, status });
          requestLog?.({ method, route, status, ms, requestId });
        },
  );
  const app = inFlight.wrap(uws.App());

  const healthz = (res: HttpResponse, req: HttpRequest): void => sendText(snapshot(res, req, 0), 200, 'ok');
  app.get('/healthz', healthz);
  app.head('/healthz', healthz);

  const readyz = (res: HttpResponse, req: HttpRequest): void => {
    const ctx = snapshot(res, req, 0);
    void deps.db.ping().then(({ owner, app: appRole }) => {
      // A node of a cluster also says 503 while it drains or its object store does not answer.
      const ok = owner && appRole && deps.ready();
      sendJson(ctx, ok ? 200 : 503, { ok });
    });
  };
  app.get('/readyz', readyz);
  app.head('/readyz', readyz);

  const openApi = JSON.stringify(openApiDocument());
  app.get('/v1/openapi.json', (res, req) => send(snapshot(res, req, 0), 200, 'application/json', openApi));

  registerManagementRoutes(app, deps);
  registerFileRoutes(app, deps);
  registerReadRoutes(app, deps);
  registerMcpRoutes(app, deps);
  if (deps.protectedResource !== null) registerProtectedResource(app, { ...deps.protectedResource, log: deps.log });
  if (deps.oauth !== null) registerOAuthRoutes(app, { ...deps, ...deps.oauth });
  registerConsoleApiRoutes(app, deps);
  const consoleServed = registerConsoleRoutes(app);

  app.any('/*', (res, req) => {
    const ctx = snapshot(res, req, 0);
    sendJsonError(ctx, new VfsError('NO_SUCH_ROUTE', { method: ctx.method, url: ctx.url.slice(0, 200) }), deps.log);
  });

  const socket = await new Promise<us_listen_socket>((resolve, reject) => {
    // The typings lack this overload; the native build and the node:http one both take it.
    const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;
    listen(host, port, EXCLUSIVE_PORT, (listenSocket) => {
      if (listenSocket) resolve(listenSocket);
      else reject(new Error(`cannot listen on ${host}:${port}`));
    });
  });
  return {
    port: uws.us_socket_local_port(socket),
    http: description,
    console: consoleServed,
    close: (graceMs) => {
      uws.us_listen_socket_close(socket);
      return inFlight.drain(graceMs);
    },
  };
}
