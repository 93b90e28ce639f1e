/**
 * Where a grep's time goes, on one thread: query evaluation (trigram postings), candidate
 * selection (file records, filters) and verification (reading texts, matching lines).
 *
 *   node --import tsx bench/engine-phases.ts <shard-dir> <pattern>... [--reps N] [-i]
 *
 * Runs each pattern N times (default 4), case-insensitively with -i, over an existing shard
 * (e.g. the one bench/grep-http.ts loads: DATA_DIR/shards/<workspace id>) and prints one JSON
 * line per run. The first run of a pattern reads from disk what the page cache lacks; compare
 * the later ones.
 */
import { evaluateQuery, selectCandidates } from '../engine/grep-candidates.js';
import { lineStartsOf } from '../engine/doc-text.js';
import { GrepFilter } from '../engine/grep-filter.js';
import { openLmdbReader } from '../engine/index.js';
import { LineMatcher } from '../engine/line-matcher.js';
import { compilePattern, patternQuery } from '../engine/regex/pattern.js';
import { Visibility } from '../engine/visibility.js';

const args = process.argv.slice(2);
const repsAt = args.indexOf('--reps');
const reps = repsAt < 0 ? 4 : Number(args.splice(repsAt, 2)[1]);
const caseAt = args.indexOf('-i');
const caseInsensitive = caseAt >= 0 && args.splice(caseAt, 1).length === 1;
const [shardDir, ...patterns] = args;
if (shardDir === undefined || patterns.length === 0) {
  process.stderr.write('usage: node --import tsx bench/engine-phases.ts <shard-dir> <pattern>... [--reps N] [-i]\n');
  process.exit(2);
}
const reader = openLmdbReader(shardDir);
for (const pattern of patterns) {
  for (let rep = 0; rep < reps; rep++) {
    const snapshot = reader.snapshot();
    const t0 = performance.now();
    const compiled = compilePattern(pattern, { caseInsensitive });
    const ids = evaluateQuery(snapshot, patternQuery(compiled.facts, { quadgrams: true }));
    const t1 = performance.now();
    const docs = selectCandidates(snapshot, ids, {
      root: '/',
      rootIsFile: false,
      filter: new GrepFilter('/', undefined, undefined),
      visibility: new Visibility(null),
      pathRange: undefined,
    });
    const t2 = performance.now();
    const matcher = new LineMatcher(compiled);
    let bytes = 0;
    let files = 0;
    let lines = 0;
    for (const meta of docs) {
      const value = snapshot.docValue(meta);
      bytes += meta.textBytes;
      matcher.begin(value.subarray(0, meta.textBytes), lineStartsOf(value, meta.textBytes, meta.lines));
      let matching = 0;
      while (matcher.next()) matching++;
      if (matching > 0) files++;
      lines += matching;
    }
    const t3 = performance.now();
    snapshot.done();
    const ms = (a: number, b: number): number => +(b - a).toFixed(1);
    process.stdout.write(
      JSON.stringify({
        pattern,
        caseInsensitive,
        rep,
        candidates: docs.length,
        cataloged: snapshot.cataloged,
        queryMs: ms(t0, t1),
        selectMs: ms(t1, t2),
        verifyMs: ms(t2, t3),
        textMB: +(bytes / 1e6).toFixed(1),
        files,
        lines,
      }) + '\n',
    );
  }
}
await reader.close();
