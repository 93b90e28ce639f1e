/** How numbers, sizes and times read in the console. */

/** 1536 → "1.5 KB". */
export function bytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = -1;
  do {
    v /= 1000;
    i++;
  } while (v >= 1000 && i < units.length - 1);
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** A timestamp in the reader's own time zone, to the second. */
export function time(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

/** 12345 → "12,345". */
export function count(n: number): string {
  return n.toLocaleString();
}
