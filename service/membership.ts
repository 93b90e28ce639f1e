/**
 * This node's membership of a cluster: its id (VFS_NODE_ID, or one generated
 * at the first start and kept in the data directory), a heartbeat row in
 * PostgreSQL every `heartbeatMs` with its state, the size of its shard copies
 * and the version of each, and whether it is ready: not draining, PostgreSQL
 * and the object store both answering (GET /readyz).
 */
import { randomBytes } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Database } from '../db/database.js';
import { type NodeState, heartbeat } from '../db/nodes.js';
import type { ObjectStore } from '../storage/object-store.js';

/** The node id kept in `dataDir` (made at the first start), unless `configured`. */
export async function nodeId(dataDir: string, configured: string | null): Promise<string> {
  if (configured !== null) return configured;
  const file = join(dataDir, 'node-id');
  const kept = await readFile(file, 'utf8').catch(() => null);
  if (kept !== null && kept.trim() !== '') return kept.trim();
  const id = `node-${randomBytes(6).toString('hex')}`;
  await writeFile(`${file}.tmp`, `${id}\n`);
  await rename(`${file}.tmp`, file);
  return id;
}

/** What the heartbeat reports besides the state. */
export interface MembershipSources {
  /** Bytes of this node's shard copies. */
  cacheBytes: () => Promise<number>;
  /** Workspace id → version of each copy held. */
  applied: () => Record<string, number>;
}

/** The heartbeat and readiness of this node. */
export class Membership {
  private state: NodeState = 'active';
  private storeOk = true;
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> = Promise.resolve();

  constructor(
    readonly id: string,
    private readonly url: string,
    private readonly db: Database,
    private readonly objects: ObjectStore,
    private readonly sources: MembershipSources,
    private readonly heartbeatMs: number,
    private readonly log: (message: string, error: unknown) => void,
  ) {}

  /** Writes the first beat (a node that cannot does not start) and beats from then on. */
  async start(): Promise<void> {
    await this.beat(true);
    this.timer = setInterval(() => {
      this.beating = this.beating.then(() => this.beat(false).catch((error: unknown) => this.log('node heartbeat failed', error)));
    }, this.heartbeatMs).unref();
  }

  /** True while the node takes new work: not draining, and the object store answered at the last beat. */
  get ready(): boolean {
    return this.state === 'active' && this.storeOk;
  }

  /** Marks the node draining (its /readyz answers 503 from now on) and tells the cluster. */
  async drain(): Promise<void> {
    this.state = 'draining';
    await this.beating;
    await this.beat(false).catch((error: unknown) => this.log('node heartbeat failed', error));
  }

  /** Stops the heartbeat and marks the node stopped. */
  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    await this.beating;
    this.state = 'stopped';
    await this.beat(false).catch((error: unknown) => this.log('node heartbeat failed', error));
  }

  private async beat(starting: boolean): Promise<void> {
    this.storeOk = await this.probeStore();
    await heartbeat(
      this.db,
      { id: this.id, url: this.url, state: this.state, cacheBytes: await this.sources.cacheBytes(), applied: this.sources.applied() },
      starting,
    );
  }

  /** Lists one key of the store: any answer, even an empty one, means it is reachable. */
  private async probeStore(): Promise<boolean> {
    try {
      for await (const _ of this.objects.list('readiness-probe/')) break;
      return true;
    } catch (error) {
      if (this.storeOk) this.log('the object store does not answer; /readyz says 503 until it does', error);
      return false;
    }
  }
}
