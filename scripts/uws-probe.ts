/**
 * Which uWebSockets.js build the loader takes on the running Node.js, and proof that it serves:
 * starts an app with one route on port 0, makes one real HTTP request to it, and prints one JSON
 * line (Node.js version, ABI, the build taken, the loader's description, the answer).
 *
 *   <node> --import tsx scripts/uws-probe.ts
 *
 * Exits 1 when the answer is not the route's. scripts/check-node-versions.sh runs it with each
 * Node.js major version the service supports.
 */
import { get } from 'node:http';
import type { us_listen_socket } from 'uWebSockets.js';
import { loadUws } from '../api/http/uws.js';

const BODY = 'probe ok\n';

const { uws, build, description } = loadUws('native');
const app = uws.App();
app.get('/probe', (res) => {
  res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'text/plain').end(BODY));
});
// The typings lack this overload (see api/server.ts).
const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;
const socket = await new Promise<us_listen_socket>((resolve, reject) =>
  listen.call(app, '127.0.0.1', 0, 1, (s) => (s ? resolve(s) : reject(new Error('cannot listen on 127.0.0.1:0')))),
);
const port = uws.us_socket_local_port(socket);
// agent false: a connection of its own, closed after the answer, so nothing keeps the loop alive.
const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
  get({ host: '127.0.0.1', port, path: '/probe', agent: false }, (response) => {
    let body = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      body += chunk;
    });
    response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
  }).on('error', reject);
});
uws.us_listen_socket_close(socket);
const ok = answer.status === 200 && answer.body === BODY;
process.stdout.write(
  JSON.stringify({ node: process.versions.node, abi: process.versions.modules, build, description, status: answer.status, served: ok }) + '\n',
);
process.exit(ok ? 0 : 1);
