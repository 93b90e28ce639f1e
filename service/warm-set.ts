/**
 * Which shard copies a node of a cluster keeps (docs/many-nodes.md, "Warm
 * copies"). Every workspace has two warm nodes: the two live nodes ranked
 * highest for it by rendezvous hashing, so that a node joining or leaving
 * moves only the workspaces it gains or loses (about 1/N of them). A node
 * fills the copies of its warm workspaces ahead of their reads; any other
 * copy is filled on its first read, and once the node's copies pass
 * `budgetBytes`, the cold ones (not warm here, not read for `idleMs`) are
 * deleted, least recently read first. Only the warm copies and those read
 * within `idleMs` follow the changes as they are committed; any other copy
 * catches up at its next read. The first of a workspace's warm nodes
 * snapshots its shard (ingest/shards/snapshots.ts): its copy follows every
 * change, whichever node ingested it.
 */
import { createHash } from 'node:crypto';
import type { Database } from '../db/database.js';
import { liveNodes } from '../db/nodes.js';
import { type ShardWorkspace, workspaceShards } from '../db/shard-repair.js';

/** Passes between two readings of the workspace list while membership stays the same. */
const LIST_EVERY = 10;

/** Warm nodes per workspace. */
export const WARM_COPIES = 2;

/** The rendezvous score of a node for a workspace: the first 8 bytes of SHA-256 of both. */
function score(nodeId: string, workspaceId: string): bigint {
  return createHash('sha256').update(nodeId).update('\u0000').update(workspaceId).digest().readBigUInt64BE(0);
}

/** The warm nodes of a workspace among `nodes`: the WARM_COPIES with the highest scores. */
export function warmNodes(workspaceId: string, nodes: readonly string[], copies = WARM_COPIES): string[] {
  return nodes
    .map((id) => ({ id, s: score(id, workspaceId) }))
    .sort((a, b) => (a.s === b.s ? (a.id < b.id ? -1 : 1) : a.s > b.s ? -1 : 1))
    .slice(0, copies)
    .map((n) => n.id);
}

/** What the warm set acts through. */
export interface WarmSetDeps {
  db: Database;
  nodeId: string;
  /** A node not seen for this long is not live. */
  deadMs: number;
  /** Copies this node holds, with the version of each. */
  held: () => Record<string, number>;
  /** When each workspace was last read on this node (ms since the epoch). */
  lastRead: (workspaceId: string) => number | undefined;
  /** Fills (or brings up to date) this node's copy of a workspace. */
  fill: (workspaceId: string, accountId: string) => Promise<void>;
  /** Bytes of this node's copy of a workspace. */
  bytes: (workspaceId: string) => Promise<number>;
  /** Deletes this node's copy of a workspace. */
  evict: (workspaceId: string) => Promise<void>;
  /**
   * Tells which copies to keep up to date as changes come (the warm ones and those read within
   * `idleMs`) and which of them to snapshot (those this node is the first warm node of).
   */
  follow: (workspaceIds: string[], snapshotted: string[]) => void;
  /** Byte budget of the copies (0: none). */
  budgetBytes: number;
  /** A copy read within this long is never evicted. */
  idleMs: number;
  log: (message: string, error: unknown) => void;
}

/** Keeps this node's warm copies filled and its cold copies under the budget. */
export class WarmSet {
  private running: Promise<void> | null = null;
  /** Workspaces warm on this node at the last pass. */
  private warm = new Set<string>();
  /** Those of them whose first warm node this is. */
  private first = new Set<string>();
  /** The live nodes the ranks were made for, and each workspace's: this node's place among its warm nodes (-1: none). */
  private nodesKey = '';
  private readonly ranked = new Map<string, number>();
  private workspaces: ShardWorkspace[] = [];
  private passes = 0;
  private stopped = false;
  /** The followed and snapshotted copies last told, as one string (told again only when it changes). */
  private followedKey: string | null = null;

  constructor(private readonly deps: WarmSetDeps) {}

  /** Workspaces warm on this node at the last pass. */
  get size(): number {
    return this.warm.size;
  }

  /** Runs one pass unless one is running or the set is stopped (called at every heartbeat). */
  tick(): void {
    if (this.running !== null || this.stopped) return;
    this.running = this.pass()
      .catch((error: unknown) => {
        if (!this.stopped) this.deps.log('keeping the warm shard copies failed', error);
      })
      .finally(() => {
        this.running = null;
      });
  }

  /** Starts no more fills (at stop; the one under way ends with the ingest thread). */
  stop(): void {
    this.stopped = true;
  }

  private async pass(): Promise<void> {
    const nodes = await liveNodes(this.deps.db, this.deps.deadMs);
    if (!nodes.includes(this.deps.nodeId)) nodes.push(this.deps.nodeId);
    const key = nodes.join(' ');
    // The workspace list is read again when membership changes, else every LIST_EVERY passes;
    // each workspace is ranked once per membership.
    if (key !== this.nodesKey || this.passes++ % LIST_EVERY === 0) {
      if (key !== this.nodesKey) this.ranked.clear();
      this.nodesKey = key;
      this.workspaces = await workspaceShards(this.deps.db, false);
      const warm = new Set<string>();
      const first = new Set<string>();
      for (const ws of this.workspaces) {
        let rank = this.ranked.get(ws.id);
        if (rank === undefined) {
          rank = warmNodes(ws.id, nodes).indexOf(this.deps.nodeId);
          this.ranked.set(ws.id, rank);
        }
        if (rank >= 0) warm.add(ws.id);
        if (rank === 0) first.add(ws.id);
      }
      this.warm = warm;
      this.first = first;
    }
    const held = this.deps.held();
    this.tellFollowed(Object.keys(held));
    for (const ws of this.workspaces) {
      if (this.stopped) return;
      if (this.warm.has(ws.id) && held[ws.id] === undefined) await this.deps.fill(ws.id, ws.accountId);
    }
    if (this.deps.budgetBytes > 0) await this.trim(Object.keys(this.deps.held()), this.warm);
  }

  /** Tells the copies to follow (warm, or read within idleMs) and to snapshot, when they changed since the last pass. */
  private tellFollowed(held: string[]): void {
    const now = Date.now();
    const followed = new Set(this.warm);
    for (const id of held) if (now - (this.deps.lastRead(id) ?? 0) <= this.deps.idleMs) followed.add(id);
    const ids = [...followed].sort();
    const snapshotted = [...this.first].sort();
    const key = `${ids.join(' ')}/${snapshotted.join(' ')}`;
    if (key === this.followedKey) return;
    this.followedKey = key;
    this.deps.follow(ids, snapshotted);
  }

  /** Deletes cold copies, least recently read first, until the copies fit the budget. */
  private async trim(held: string[], warm: Set<string>): Promise<void> {
    const sizes = new Map<string, number>();
    for (const id of held) sizes.set(id, await this.deps.bytes(id));
    let total = [...sizes.values()].reduce((a, b) => a + b, 0);
    const now = Date.now();
    const cold = held
      .filter((id) => !warm.has(id) && now - (this.deps.lastRead(id) ?? 0) > this.deps.idleMs)
      .sort((a, b) => (this.deps.lastRead(a) ?? 0) - (this.deps.lastRead(b) ?? 0));
    for (const id of cold) {
      if (total <= this.deps.budgetBytes) break;
      await this.deps.evict(id);
      total -= sizes.get(id) ?? 0;
    }
  }
}
