/**
 * A real S3 server for the tests of the object store: a single-node OpenStack
 * Swift cluster with its S3 API (the `s3api` middleware) on loopback, from
 * Debian 12's packages (Swift 2.30.1; `.ci/run` installs swift-proxy,
 * swift-object, swift-container, swift-account and memcached).
 *
 * Everything lives in a temp directory written here: swift.conf, the four
 * servers' configs, the three rings (one replica, one device each, built at
 * start), the device directory (`mount_check = false`: a plain directory, on a
 * file system with user xattrs, which Swift keeps object metadata in) and one
 * log file per process. Each server runs with `workers = 0`, so it is one
 * process that stays in the foreground, as the current user; memcached holds
 * tempauth's tokens (tempauth fails every request without it). Ports are
 * picked free on 127.0.0.1 just before the start.
 *
 * Every process leads a process group of its own, which `stop()` kills, and is
 * started under `setpriv --pdeathsig KILL`: the kernel kills it when the thread
 * that spawned it goes, so a test run that is killed leaves no server behind
 * (with vitest's `forks` pool that thread is the test process's main thread;
 * Swift's setuid() to the same user keeps the death signal, which only a
 * change of credentials clears). The next start removes the directory a killed
 * run left.
 *
 * The S3 API of 2.30 refuses the AWS SDK's default streaming checksums (fixed
 * in 2.35.1): clients set `requestChecksumCalculation: 'WHEN_REQUIRED'`.
 */
import { type ChildProcess, execFile as execFileCb, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';

const execFile = promisify(execFileCb);

/** The packages' interpreter: a python3 earlier in PATH (pyenv, a venv) lacks the swift module. */
const PYTHON = '/usr/bin/python3';
/** Longest a start waits for every server to answer its health check (2 shared cores can be slow). */
const START_TIMEOUT_MS = 60_000;
const POLL_MS = 100;
/** 2^6 partitions: the smallest ring that builds in an instant and still spreads a test's objects. */
const PART_POWER = 6;
const HOST = '127.0.0.1';
const DIR_PREFIX = 'vfs-test-swift-';
/** Holds the pid of the process that started the cluster, so that a later start can tell an orphaned directory. */
const OWNER_FILE = 'owner.pid';
const DEVICE = 'd1';
/** One file of each package the cluster needs, checked first so that a machine without them gets a plain answer. */
const PACKAGE_FILES = ['swift-proxy', 'swift-object', 'swift-container', 'swift-account'].map((p) => `/usr/bin/${p}-server`).concat('/usr/bin/memcached');
const INSTALL = 'apt-get install --no-install-recommends swift-proxy swift-object swift-container swift-account memcached';

/**
 * Runs one Swift server as `swift-<name>-server conf -v` does, after pointing Swift at the temp
 * directory's swift.conf: 2.30's servers read it (hash path suffix, storage policies, constraints)
 * from /etc/swift whatever `swift_dir` says, unless set_swift_dir() runs before the modules that
 * read it are imported.
 */
const LAUNCHER = `
import sys
from swift.common.utils import set_swift_dir
set_swift_dir(sys.argv[1])
from swift.common.wsgi import run_wsgi
sys.exit(run_wsgi(sys.argv[2], sys.argv[3], verbose=True))
`;

/**
 * Builds one ring per backend: one replica, one device, min_part_hours 0, written into swift_dir.
 * It does what `swift-ring-builder <f> create`, `add` and `rebalance` do, in one process: the
 * nine commands cost about 4 s of CPU, this 0.4 s.
 */
const RING_BUILDER = `
import sys
from swift.common.ring import RingBuilder
swift_dir, host, device = sys.argv[1:4]
for spec in sys.argv[4:]:
    name, port = spec.split(':')
    builder = RingBuilder(${PART_POWER}, 1, 0)
    builder.add_dev({'region': 1, 'zone': 1, 'ip': host, 'port': int(port), 'device': device, 'weight': 1})
    builder.rebalance()
    builder.get_ring().save('%s/%s.ring.gz' % (swift_dir, name))
`;

type ServerName = 'proxy' | 'account' | 'container' | 'object';
const BACKENDS = ['account', 'container', 'object'] as const;

/** Where a running cluster's S3 API is and the keys it takes: plain data, so the global setup can `provide` it. */
export interface SwiftAddress {
  /** The S3 endpoint, `http://127.0.0.1:<port>` (use path-style addressing). */
  endpoint: string;
  /** The tempauth user `test:tester`. */
  accessKeyId: string;
  secretAccessKey: string;
  /** Any region is accepted; s3api's default location is us-east-1. */
  region: string;
}

/** The service's environment for keeping its objects at `url` (`s3://bucket/prefix`) on the cluster at `address`. */
export function swiftStorageEnv(address: SwiftAddress, url: string): Record<string, string> {
  return {
    VFS_STORAGE_URL: url,
    AWS_ENDPOINT_URL_S3: address.endpoint,
    AWS_ACCESS_KEY_ID: address.accessKeyId,
    AWS_SECRET_ACCESS_KEY: address.secretAccessKey,
    AWS_REGION: address.region,
  };
}

/** A running cluster, with the controls fault tests use on its proxy. */
export interface SwiftCluster extends SwiftAddress {
  /** Kills the proxy: connections to the endpoint are refused until `startProxy`. */
  stopProxy(): Promise<void>;
  /** Starts the proxy again on the same port and waits until it answers. */
  startProxy(): Promise<void>;
  /** Freezes the proxy (SIGSTOP): the kernel still accepts connections, nothing answers them, as with a hung server. */
  pauseProxy(): void;
  /** Lets a paused proxy run again; requests it accepted meanwhile are then answered. */
  resumeProxy(): void;
  /** The proxy's log so far: one line per request it served (proxy_logging), besides its own messages. */
  proxyLog(): Promise<string>;
  /** The pids of the cluster's servers (their workers are their children), for measuring their CPU. */
  pids(): number[];
  /** Kills every process of the cluster and removes its directory. */
  stop(): Promise<void>;
}

interface Daemon {
  child: ChildProcess;
  exited: Promise<void>;
}

/** Starts a single-node cluster in a fresh temp directory and resolves once all four servers answer. */
export async function startSwift(): Promise<SwiftCluster> {
  const missing = PACKAGE_FILES.filter((file) => !existsSync(file));
  if (missing.length > 0) throw new Error(`the Swift test server needs ${missing.join(', ')}: ${INSTALL} (as .ci/run does)`);
  await removeOrphans();
  const dir = await mkdtemp(join(tmpdir(), DIR_PREFIX));
  await writeFile(join(dir, OWNER_FILE), String(process.pid));
  const daemons = new Map<string, Daemon>();
  const stopAll = async (): Promise<void> => {
    await Promise.all([...daemons.values()].map(kill));
    daemons.clear();
  };
  try {
    const [proxyPort, memcachePort, ...backendPorts] = await freePorts(5);
    const ports: Record<ServerName, number> = { proxy: proxyPort, account: backendPorts[0], container: backendPorts[1], object: backendPorts[2] };
    const user = userInfo().username;
    await mkdir(join(dir, 'devices', DEVICE), { recursive: true });
    await writeFile(join(dir, 'swift.conf'), swiftConf());
    await writeFile(join(dir, 'proxy-server.conf'), proxyConf(dir, user, proxyPort, memcachePort));
    for (const name of BACKENDS) await writeFile(join(dir, `${name}-server.conf`), backendConf(dir, user, name, ports[name]));
    await buildRings(dir, ports);

    // memcached refuses to run as root unless told which user to be.
    const memcachedArgs = ['-l', HOST, '-p', String(memcachePort), '-U', '0', ...(process.getuid?.() === 0 ? ['-u', user] : [])];
    daemons.set('memcached', spawnDaemon(dir, 'memcached', 'memcached', memcachedArgs));
    const startServer = (name: ServerName): void => {
      const section = name === 'proxy' ? 'proxy-server' : `${name}-server`;
      daemons.set(name, spawnDaemon(dir, name, PYTHON, ['-c', LAUNCHER, dir, join(dir, `${section}.conf`), section]));
    };
    for (const name of [...BACKENDS, 'proxy'] as const) startServer(name);
    await Promise.all(BACKENDS.map((name) => waitHealthy(dir, name, ports[name], daemons.get(name)!)));
    await waitHealthy(dir, 'proxy', proxyPort, daemons.get('proxy')!);
    // memcached has no health check of its own; a port taken since it was picked ends it at once.
    if (exitedAlready(daemons.get('memcached')!)) throw new Error(`memcached exited:\n${await readLog(dir, 'memcached')}`);

    const proxy = (): Daemon => {
      const d = daemons.get('proxy');
      if (d === undefined) throw new Error('the Swift proxy is stopped');
      return d;
    };
    return {
      endpoint: `http://${HOST}:${proxyPort}`,
      accessKeyId: 'test:tester',
      secretAccessKey: 'testing',
      region: 'us-east-1',
      async stopProxy() {
        await kill(proxy());
        daemons.delete('proxy');
      },
      async startProxy() {
        if (daemons.has('proxy')) throw new Error('the Swift proxy is already running');
        startServer('proxy');
        await waitHealthy(dir, 'proxy', proxyPort, proxy());
      },
      pauseProxy: () => signalGroup(proxy().child, 'SIGSTOP'),
      resumeProxy: () => signalGroup(proxy().child, 'SIGCONT'),
      proxyLog: () => readFile(join(dir, 'proxy.log'), 'utf8').catch(() => ''),
      pids: () => [...daemons.values()].flatMap((d) => (d.child.pid === undefined ? [] : [d.child.pid])),
      async stop() {
        await stopAll();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await stopAll();
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

declare module 'vitest' {
  export interface ProvidedContext {
    swift: SwiftAddress;
  }
}

/**
 * For a global setup: starts one cluster for the whole run, provides its address to the test
 * files as `inject('swift')`, and returns the teardown. Only the address crosses to the test
 * processes, so a test that stops or pauses a proxy starts a cluster of its own.
 */
export async function provideSwift(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startSwift();
  const { endpoint, accessKeyId, secretAccessKey, region } = cluster;
  project.provide('swift', { endpoint, accessKeyId, secretAccessKey, region });
  return () => cluster.stop();
}

function swiftConf(): string {
  return ini({
    'swift-hash': { swift_hash_path_suffix: 'vfs-test', swift_hash_path_prefix: 'vfs-test' },
    'storage-policy:0': { name: 'Policy-0', default: 'yes' },
  });
}

function commonDefaults(dir: string, user: string, port: number): Record<string, string> {
  return {
    bind_ip: HOST,
    bind_port: String(port),
    // 0: one process, no forked workers, so killing it kills the server.
    workers: '0',
    user,
    swift_dir: dir,
    // Verbose mode (the launcher's `verbose=True`) copies the log to stderr, which goes to the log
    // file; Swift also sends it to syslog, /dev/log or else UDP port 514, where nothing may listen.
    log_level: 'INFO',
  };
}

function proxyConf(dir: string, user: string, port: number, memcachePort: number): string {
  return ini({
    DEFAULT: commonDefaults(dir, user, port),
    // s3api before tempauth, or every S3 request is refused; slo after s3api, or s3api turns
    // multipart uploads off; cache (memcached), or tempauth fails every request; healthcheck for
    // the start. The proxy adds catch_errors, gatekeeper, listing_formats, copy, dlo and
    // versioned_writes itself when missing: named, the pipeline in the file is the one that runs.
    'pipeline:main': {
      pipeline:
        'catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo versioned_writes proxy-logging proxy-server',
    },
    // tempauth's account exists only once a request creates it; without this no bucket can be made.
    'app:proxy-server': { use: 'egg:swift#proxy', account_autocreate: 'true' },
    'filter:catch_errors': { use: 'egg:swift#catch_errors' },
    'filter:gatekeeper': { use: 'egg:swift#gatekeeper' },
    'filter:healthcheck': { use: 'egg:swift#healthcheck' },
    'filter:proxy-logging': { use: 'egg:swift#proxy_logging' },
    'filter:cache': { use: 'egg:swift#memcache', memcache_servers: `${HOST}:${memcachePort}` },
    'filter:listing_formats': { use: 'egg:swift#listing_formats' },
    'filter:s3api': { use: 'egg:swift#s3api' },
    // Account `test`, user `tester`, key `testing`: the S3 access key is `test:tester`.
    'filter:tempauth': { use: 'egg:swift#tempauth', user_test_tester: 'testing .admin' },
    'filter:copy': { use: 'egg:swift#copy' },
    'filter:slo': { use: 'egg:swift#slo' },
    'filter:dlo': { use: 'egg:swift#dlo' },
    'filter:versioned_writes': { use: 'egg:swift#versioned_writes' },
  });
}

function backendConf(dir: string, user: string, name: (typeof BACKENDS)[number], port: number): string {
  return ini({
    DEFAULT: { ...commonDefaults(dir, user, port), devices: join(dir, 'devices'), mount_check: 'false' },
    'pipeline:main': { pipeline: `healthcheck ${name}-server` },
    'filter:healthcheck': { use: 'egg:swift#healthcheck' },
    [`app:${name}-server`]: { use: `egg:swift#${name}` },
  });
}

function ini(sections: Record<string, Record<string, string>>): string {
  const lines = (values: Record<string, string>): string =>
    Object.entries(values)
      .map(([k, v]) => `${k} = ${v}\n`)
      .join('');
  return Object.entries(sections)
    .map(([name, values]) => `[${name}]\n${lines(values)}`)
    .join('\n');
}

/**
 * Removes the directories of clusters whose starting process is gone (a test run that was killed:
 * its servers died with it, their directory stayed). A directory without an owner file is still
 * being made by a start elsewhere and is left alone.
 */
async function removeOrphans(): Promise<void> {
  const names = (await readdir(tmpdir())).filter((name) => name.startsWith(DIR_PREFIX));
  for (const name of names) {
    const dir = join(tmpdir(), name);
    const owner = Number(await readFile(join(dir, OWNER_FILE), 'utf8').catch(() => ''));
    if (owner > 0 && !alive(owner)) await rm(dir, { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive, another user's.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Builds the three rings in one interpreter. */
async function buildRings(dir: string, ports: Record<ServerName, number>): Promise<void> {
  await execFile(PYTHON, ['-c', RING_BUILDER, dir, HOST, DEVICE, ...BACKENDS.map((name) => `${name}:${ports[name]}`)]);
}

/** Ports free right now on the loopback; held together so that no two are the same. */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, HOST, () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

function spawnDaemon(dir: string, name: string, command: string, args: string[]): Daemon {
  const log = openSync(join(dir, `${name}.log`), 'a');
  try {
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', command, ...args], {
      // Its own process group, so that a signal to the group reaches it and nothing else.
      detached: true,
      stdio: ['ignore', log, log],
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' },
    });
    // A command that cannot be started emits 'error' and may never emit 'exit'.
    const exited = new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    return { child, exited };
  } finally {
    closeSync(log);
  }
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // Already gone.
  }
}

function exitedAlready(daemon: Daemon): boolean {
  return daemon.child.exitCode !== null || daemon.child.signalCode !== null;
}

async function readLog(dir: string, name: string): Promise<string> {
  return (await readFile(join(dir, `${name}.log`), 'utf8').catch(() => '')).slice(-4000);
}

async function kill(daemon: Daemon): Promise<void> {
  if (!exitedAlready(daemon)) signalGroup(daemon.child, 'SIGKILL');
  await daemon.exited;
}

async function waitHealthy(dir: string, name: string, port: number, daemon: Daemon): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let gone = false;
  void daemon.exited.then(() => (gone = true));
  for (;;) {
    try {
      const response = await fetch(`http://${HOST}:${port}/healthcheck`, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) return;
      await response.body?.cancel();
    } catch {
      // Not listening yet.
    }
    if (gone || Date.now() > deadline) {
      throw new Error(`the Swift ${name} server ${gone ? 'exited' : 'did not answer in time'}:\n${await readLog(dir, name)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
