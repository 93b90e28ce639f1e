/**
 * Every test file's responses checked against the OpenAPI document (a vitest setup file): the
 * global fetch is wrapped, each response the service gives is checked (contract.ts) as the test
 * reads it, and a file whose responses broke the contract fails in its last hook.
 */
import { afterAll, expect } from 'vitest';
import { openApiDocument } from '../../api/contract/openapi.js';
import { ContractChecker, type ObservedResponse } from './contract.js';

const checker = new ContractChecker(openApiDocument());
const mismatches: string[] = [];
const pending = new Set<Promise<void>>();
const original = globalThis.fetch;

globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
  const response = await original(input, init);
  const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
  const url = input instanceof Request ? input.url : String(input);
  if (!checker.covers(method, url)) return response;
  const contentType = response.headers.get('content-type');
  const observed = { method, url, status: response.status, contentType };
  if (!/^application\/json/i.test(contentType ?? '') || response.status === 204) {
    record(checker.check(observed));
    return response;
  }
  // The test reads the body; the check reads a copy.
  const copy = response.clone();
  const check = copy
    .text()
    .then(
      (body) => record(body === '' ? checker.check(observed) : checkJson(observed, body)),
      () => {},
    ) // rejected: the test cancelled the body
    .finally(() => pending.delete(check));
  pending.add(check);
  return response;
};

function checkJson(observed: Omit<ObservedResponse, 'json'>, body: string): string | null {
  try {
    return checker.check({ ...observed, json: JSON.parse(body) });
  } catch {
    return `${observed.method} ${observed.url} ${observed.status}: a body labelled JSON is not JSON: ${body.slice(0, 100)}`;
  }
}

function record(mismatch: string | null): void {
  if (mismatch !== null && mismatches.length < 20) mismatches.push(mismatch);
}

afterAll(async () => {
  // Bodies still unread after a while belong to responses the test left open.
  await Promise.race([Promise.all(pending), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
  expect(mismatches, 'responses that do not match the OpenAPI document').toEqual([]);
});
