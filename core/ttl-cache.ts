/** A load under way or done (`loaded` set once it has), and when it expires. */
interface Entry<V> {
  value: Promise<V>;
  until: number;
  loaded?: V;
}

/**
 * A bounded map of values that expire, loaded once however many callers miss together: the
 * first miss stores the load's promise, and every request until it expires shares it. Without
 * that, each expiry of a busy entry sent every request in flight (hundreds under load) to the
 * database at once. A failed load is forgotten, so the next caller tries again. The map holds
 * at most `maxEntries` loaded values, plus the loads under way.
 *
 * `clear` forgets loads still running as well: a caller after it never receives a value
 * loaded before it, so a revocation or deletion that clears the cache is never undone by a
 * lookup that was already under way.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, Entry<V>>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string, load: () => Promise<V>): Promise<V> {
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit !== undefined && hit.until > now) return hit.value;
    const value = load();
    if (this.ttlMs <= 0) return value;
    const entry: Entry<V> = { value, until: now + this.ttlMs };
    this.entries.delete(key); // re-inserted last: the oldest entries are evicted first
    this.entries.set(key, entry);
    // Only a value that loaded makes room, so failing lookups never push good entries out.
    value.then(
      (loaded) => {
        entry.loaded = loaded;
        while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return value;
  }

  /** The value `get` would give at once, if it has loaded and not expired; else undefined. */
  peek(key: string): V | undefined {
    const hit = this.entries.get(key);
    return hit !== undefined && hit.until > Date.now() ? hit.loaded : undefined;
  }

  clear(): void {
    this.entries.clear();
  }
}
