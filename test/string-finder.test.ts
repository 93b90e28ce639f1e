import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { LiteralSet, StringFinder } from '../engine/string-finder.js';
import { seededRandom } from './helpers/random.js';

/** The reference: the leftmost position ≥ `from` at which one of `strings` occurs in `text`. */
function leftmost(strings: readonly Buffer[], text: Buffer, from: number): number {
  let best = -1;
  for (const s of strings) {
    const at = text.indexOf(s, from);
    if (at !== -1 && (best === -1 || at < best)) best = at;
  }
  return best;
}

/** Every position a finder reports, asking again from one byte after each. */
function positions(find: (from: number) => number): number[] {
  const out: number[] = [];
  for (let at = find(0); at !== -1; at = find(at + 1)) out.push(at);
  return out;
}

function finderPositions(strings: readonly Buffer[], text: Buffer): number[] {
  const finder = new StringFinder(strings);
  finder.begin(text);
  return positions((from) => finder.find(text, from));
}

const buffers = (strings: readonly string[]) => strings.map((s) => Buffer.from(s));

describe('StringFinder', () => {
  // [strings, text, the positions reported one after another]
  const rows: [string[], string, number[]][] = [
    [['abc'], 'abc', [0]],
    [['abc'], 'xxabc', [2]],
    [['abc'], 'ab', []],
    [['needle'], 'needl', []],
    [['abc'], '', []],
    [['aa'], 'aaaa', [0, 1, 2]],
    [['foo', 'foobar'], 'foobar foo', [0, 7]],
    [['foobar', 'foo'], 'foobar foo', [0, 7]],
    [['abcd', 'bc'], 'abcd', [0, 1]], // overlapping: both reported, leftmost first
    [['bc', 'abcd'], 'xabcd', [1, 2]],
    [['x', 'yz'], 'ayzx', [1, 3]], // one-byte strings
    [['a\r'], 'a\r\nb\r\na\r', [0, 6]], // CRLF line ends
    [['日本語', 'é'], 'café 日本語', [3, 6]],
    [['kmem_cache_create_usercopy', 'vmalloc_to_page', 'copy_from_kernel_nofault'], 'vmalloc_to_pag copy_from_kernel_nofault vmalloc_to_page', [15, 40]],
  ];
  it.each(rows)('%j in %j -> %j', (strings, text, expected) => {
    expect(finderPositions(buffers(strings), Buffer.from(text))).toEqual(expected);
  });

  it('anchors a string at a byte that is rare in the texts, and sets strings whose bytes are all common', () => {
    const prose = Buffer.from('the quick brown fox jumps over the lazy dog\n'.repeat(200));
    const rare = new StringFinder(buffers(['lazyQmarker']));
    rare.begin(prose);
    expect(rare.ways()).toEqual(['anchored at 4']);
    const letters = Buffer.from('abcdefghijklmnopqrstuvwxyz'.repeat(400));
    const common = new StringFinder(buffers(['abcdefghijklmnopqrstuvwxyz', 'nopqrstuvwxyzabc']));
    common.begin(letters);
    expect(common.ways()).toEqual(['set', 'set']);
    expect(positions((from) => common.find(letters, from)).slice(0, 3)).toEqual([0, 13, 26]);
  });

  it('finds what indexOf finds, for random strings and texts', () => {
    const token = fc.constantFrom('a', 'b', 'ab', 'ba', 'c', '\n', '\r\n', 'é', '日');
    fc.assert(
      fc.property(
        fc.array(
          fc.array(token, { minLength: 1, maxLength: 6 }).map((t) => t.join('')),
          { minLength: 1, maxLength: 5 },
        ),
        fc.array(
          fc.array(token, { maxLength: 300 }).map((t) => t.join('')),
          { minLength: 1, maxLength: 4 },
        ),
        (strings, texts) => {
          const needles = buffers(strings);
          const finder = new StringFinder(needles);
          for (const t of texts) {
            const text = Buffer.from(t);
            finder.begin(text);
            expect(positions((from) => finder.find(text, from))).toEqual(positions((from) => leftmost(needles, text, from)));
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('stays exact while its plan follows texts whose bytes change', () => {
    // Big texts of changing make-up: the finder samples and re-plans as it goes (anchored while
    // the strings' bytes are rare, in a set once they are common).
    const random = seededRandom(7);
    const needles = buffers(['qqqq', 'markerstring', 'abab']);
    const finder = new StringFinder(needles);
    const plans = new Set<string>();
    for (let t = 0; t < 48; t++) {
      const alphabet = ['xy', 'qmab', 'xyab'][Math.floor(t / 16)];
      const parts: string[] = [];
      for (let i = 0; i < 200_000; i++) parts.push(alphabet[Math.floor(random() * alphabet.length)]);
      const text = Buffer.from(parts.join(''));
      finder.begin(text);
      plans.add(finder.ways().join());
      expect(positions((from) => finder.find(text, from))).toEqual(positions((from) => leftmost(needles, text, from)));
    }
    expect(plans.size).toBeGreaterThan(1);
  });
});

describe('LiteralSet', () => {
  it('finds the leftmost occurrence, as indexOf per string does', () => {
    const token = fc.constantFrom('a', 'b', 'c', 'ab', '\n', 'é');
    fc.assert(
      fc.property(
        fc.array(
          fc.array(token, { minLength: 2, maxLength: 8 }).map((t) => t.join('')),
          { minLength: 1, maxLength: 6 },
        ),
        fc.array(token, { maxLength: 400 }).map((t) => t.join('')),
        (strings, t) => {
          const needles = buffers(strings).filter((s) => s.byteLength >= 2);
          fc.pre(needles.length > 0);
          const set = new LiteralSet(needles);
          const text = Buffer.from(t);
          expect(positions((from) => set.indexIn(text, from))).toEqual(positions((from) => leftmost(needles, text, from)));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('handles strings longer than its window (255 bytes)', () => {
    const long = Buffer.from('x'.repeat(300) + 'y');
    const set = new LiteralSet([long, Buffer.from('y'.repeat(260))]);
    const text = Buffer.concat([Buffer.from('x'.repeat(400)), Buffer.from('y'.repeat(10))]);
    expect(set.indexIn(text, 0)).toBe(100);
    expect(set.indexIn(text, 101)).toBe(-1);
  });
});
