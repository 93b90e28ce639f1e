/**
 * One service per data directory. Two services on one directory would each take the other's
 * upload temp files for leftovers of a dead process, and write the same shards with separate
 * in-memory state; so a start takes the directory's lock first, and a second start is refused
 * with a message naming the holder. The operator command takes it too while it runs the
 * embedded PostgreSQL itself (no service running), so that no service adopts a cluster the
 * command is about to stop.
 *
 * The lock is a Unix socket in Linux's abstract namespace, named after the directory's real
 * path: binding it is atomic, and the kernel releases it when the process ends, however it
 * ends (SIGKILL included), so there is no stale lock to judge. A process that finds it taken
 * connects to it and the holder answers with its pid. Abstract sockets belong to a network
 * namespace: two containers that share the directory but not a network namespace do not see
 * each other's lock. Elsewhere than Linux the lock is not taken (the service is built for Linux).
 */
import { createHash } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';

/** A held lock of a data directory. */
export interface DataDirLock {
  release(): Promise<void>;
}

/** The lock is held by another process. */
export class DataDirInUse extends Error {}

/** Takes the lock of `dataDir` (created if missing); throws, naming the holder, when another process holds it. */
export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  if (process.platform !== 'linux') return { release: async () => {} };
  await mkdir(dataDir, { recursive: true });
  const real = await realpath(dataDir);
  const name = '\0agent-vfs-data-' + createHash('sha256').update(real).digest('hex').slice(0, 32);
  const server = createServer((socket) => socket.end(`${process.pid}\n`));
  const taken = await new Promise<boolean>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolve(true) : reject(error)));
    server.listen(name, () => resolve(false));
  });
  if (taken) {
    const holder = await holderPid(name);
    throw new DataDirInUse(`the data directory ${real} is in use by another agent-vfs process${holder === null ? '' : ` (pid ${holder})`}; stop it first`);
  }
  server.unref(); // the lock does not keep the process alive
  return { release: () => close(server) };
}

/** The pid the holder of `name` answers with, or null when it does not answer in time. */
function holderPid(name: string): Promise<string | null> {
  return new Promise((resolve) => {
    let answer = '';
    const socket = connect(name);
    const done = (pid: string | null): void => {
      socket.destroy();
      resolve(pid);
    };
    socket.setTimeout(1000, () => done(null));
    socket.on('data', (data: Buffer) => (answer += data.toString()));
    socket.on('end', () => done(/^\d+$/.test(answer.trim()) ? answer.trim() : null));
    socket.on('error', () => done(null));
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
