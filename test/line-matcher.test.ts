import { describe, expect, it } from 'vitest';
import { literalAlternatives } from '../engine/line-matcher.js';

describe('literalAlternatives', () => {
  it.each([
    ['sched_clock_register', ['sched_clock_register']],
    ['foo|bar|baz', ['foo', 'bar', 'baz']],
    ['EXPORT_SYMBOL\\(kmalloc\\)', ['EXPORT_SYMBOL(kmalloc)']],
    ['a\\.b|c\\|d', ['a.b', 'c|d']],
    ['naïve|日本語', ['naïve', '日本語']],
    ['a b', ['a b']],
    ['a.b', null],
    ['^foo', null],
    ['foo$', null],
    ['a|', null],
    ['|a', null],
    ['a||b', null],
    ['(foo|bar)', null],
    ['fo+', null],
    ['\\w+', null],
    ['\\x41', null],
    ['\\Qa.b\\E', null],
    ['[ab]', null],
    ['a{2}', null],
    ['', null],
    ['tab\there', null],
  ] as const)('%j -> %j', (pattern, expected) => {
    expect(literalAlternatives(pattern)).toEqual(expected);
  });
});
