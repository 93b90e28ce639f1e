/**
 * A measurement too costly to repeat at every call, run again only once `factor` times its last
 * duration has passed; the calls between get the last value. A cluster node's heartbeat reports
 * the bytes of its shard copies every 2 s by walking their directories: 1.4 s of CPU for 10,000
 * copies (bench/copies-walk.ts), which every 2 s would take most of a core. Paced at 50 times its
 * duration, the walk takes about 2% of the time however many copies there are, and is as
 * fresh as before where it is cheap.
 */
export function paced<T>(measure: () => Promise<T>, factor: number, now: () => number = () => performance.now()): () => Promise<T> {
  let last: { value: T; next: number } | null = null;
  return async () => {
    const started = now();
    if (last !== null && started < last.next) return last.value;
    const value = await measure();
    last = { value, next: started + factor * (now() - started) };
    return value;
  };
}
