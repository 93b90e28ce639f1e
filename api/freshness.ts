/**
 * Read-your-writes across nodes: before a read tool runs on a node of a
 * cluster, the node's copy of the workspace's shard must hold the version
 * committed when the request arrived (so a file any node has shown `ready` is
 * seen). The committed versions of the workspaces waiting are asked in one
 * statement per round trip: a request waits for a query that starts after it
 * arrived (one in flight at a time, the next one collecting meanwhile). A copy
 * behind catches up in the ingest thread (ingest/shards/sync.ts); one that
 * cannot within `waitMs` answers 503 with Retry-After, and keeps catching up.
 */
import { existsSync } from 'node:fs';
import { VfsError } from '../core/errors.js';
import { Coalescer } from '../core/coalescer.js';

/** What the gate asks of the rest of the service. */
export interface FreshnessDeps {
  /** The committed versions of the workspaces (absent: deleted). */
  versions: (ids: string[]) => Promise<Map<string, number>>;
  /** Brings this node's copy to at least `version`; `lost`: its directory went missing. */
  catchUp: (workspaceId: string, accountId: string, version: number, lost: boolean) => Promise<void>;
  /** The shard directory of a workspace on this node. */
  shardDir: (workspaceId: string) => string;
  /** Closes the read threads' handles on a copy whose directory went missing. */
  shardLost: (workspaceId: string) => void;
  /** Told why a catch-up failed (the read answers 503). */
  failed: (workspaceId: string, error: unknown) => void;
  /** Longest a read waits for a copy to catch up. */
  waitMs: number;
}

/** The gate the read tools pass on a node of a cluster. */
export class Freshness {
  /** Workspace → the version this node's copy holds (told by the ingest thread). */
  private readonly applied = new Map<string, number>();
  /** Workspace → when it was last read on this node (ms since the epoch). */
  private readonly reads = new Map<string, number>();
  /** The committed versions asked in one statement for every read waiting (absent: deleted). */
  private readonly committed: Coalescer<string, number | undefined>;

  constructor(private readonly deps: FreshnessDeps) {
    this.committed = new Coalescer(async (ids) => {
      const versions = await deps.versions([...new Set(ids)]);
      return ids.map((id) => versions.get(id));
    });
  }

  /** This node's copy of a workspace reached `version`. */
  reached(workspaceId: string, version: number): void {
    if ((this.applied.get(workspaceId) ?? -1) < version) this.applied.set(workspaceId, version);
  }

  /** This node's copy of a workspace was dropped. */
  forget(workspaceId: string): void {
    this.applied.delete(workspaceId);
  }

  /** When the workspace was last read on this node (ms since the epoch), if since the start. */
  lastRead(workspaceId: string): number | undefined {
    return this.reads.get(workspaceId);
  }

  /** The version of each copy this node holds (for the heartbeat). */
  held(): Record<string, number> {
    return Object.fromEntries(this.applied);
  }

  /** Resolves once this node's copy of the workspace holds what was committed when it was called. */
  async ensure(workspaceId: string, accountId: string, name: string): Promise<void> {
    this.reads.set(workspaceId, Date.now());
    const committed = await this.committed.submit(workspaceId).catch(() => {
      throw new VfsError('UNAVAILABLE', { what: 'the database' }, { 'retry-after': '1' });
    });
    // Deleted meanwhile (through another node, whose notice may not have come yet).
    if (committed === undefined) throw new VfsError('NO_SUCH_WORKSPACE', { name });
    const have = this.applied.get(workspaceId);
    const lost = have !== undefined && !existsSync(`${this.deps.shardDir(workspaceId)}/data.mdb`);
    if (!lost && have !== undefined && have >= committed) return;
    if (lost) {
      this.applied.delete(workspaceId);
      this.deps.shardLost(workspaceId);
    }
    const behind = (): VfsError => new VfsError('UNAVAILABLE', { what: "this node's copy of the workspace (catching up)" }, { 'retry-after': '1' });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(behind()), this.deps.waitMs);
    });
    const caughtUp = this.deps.catchUp(workspaceId, accountId, committed, lost).catch((error: unknown) => {
      this.deps.failed(workspaceId, error);
      throw behind();
    });
    try {
      await Promise.race([caughtUp, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
