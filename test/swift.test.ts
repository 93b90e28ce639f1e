/**
 * The object store's test server (helpers/swift.ts) through the AWS SDK: the S3 operations the
 * object store needs work against Swift's S3 API, its known limits are as documented (no
 * conditional writes; no aws-chunked streaming checksums before Swift 2.35.1), and a proxy that is
 * down or hung fails the client's requests in a known way, after which the same client recovers.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SwiftCluster, startSwift } from './helpers/swift.js';

const BUCKET = 'vfs-test';
/** The slowest start the tests accept; it took 1.9 to 4.3 s on 2 busy cores. */
const START_BOUND_MS = 30_000;

let swift: SwiftCluster;
let s3: S3Client;
let startMs = 0;

/** A client as the object store will make one; `config` overrides. */
function client(config: S3ClientConfig = {}): S3Client {
  return new S3Client({
    endpoint: swift.endpoint,
    region: swift.region,
    credentials: { accessKeyId: swift.accessKeyId, secretAccessKey: swift.secretAccessKey },
    forcePathStyle: true,
    // Swift before 2.35.1 refuses the SDK's default aws-chunked uploads with trailing checksums.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    ...config,
  });
}

/** What a rejected send carried, for comparing with toMatchObject. */
async function failure(sending: Promise<unknown>): Promise<{ name: string; code?: string; status?: number; attempts?: number; ms: number }> {
  const started = performance.now();
  try {
    await sending;
  } catch (error) {
    const e = error as Error & { code?: string; $metadata?: { httpStatusCode?: number; attempts?: number } };
    return { name: e.name, code: e.code, status: e.$metadata?.httpStatusCode, attempts: e.$metadata?.attempts, ms: performance.now() - started };
  }
  throw new Error('the request succeeded');
}

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

beforeAll(async () => {
  const started = performance.now();
  swift = await startSwift();
  startMs = performance.now() - started;
  console.info(`Swift cluster started in ${Math.round(startMs)} ms`);
  s3 = client();
});
afterAll(async () => {
  s3?.destroy();
  await swift?.stop();
});

describe('Swift S3 API through the AWS SDK', () => {
  it('starts within the bound', () => {
    expect(startMs).toBeLessThan(START_BOUND_MS);
  });

  it('creates a bucket that was not there', async () => {
    expect(await failure(s3.send(new HeadBucketCommand({ Bucket: BUCKET })))).toMatchObject({ name: 'NotFound', status: 404 });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    expect((await s3.send(new HeadBucketCommand({ Bucket: BUCKET }))).$metadata.httpStatusCode).toBe(200);
  });

  it('stores, reads, sizes and deletes an object', async () => {
    const key = 'originals/every-byte.bin';
    const body = new Uint8Array(Array.from({ length: 4096 }, (_, i) => i % 256));
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }));
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    expect(await got.Body!.transformToByteArray()).toEqual(body);
    expect((await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }))).ContentLength).toBe(body.length);

    await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: key }));
    expect(await failure(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key })))).toMatchObject({ name: 'NotFound', status: 404 });
    expect(await failure(s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key })))).toMatchObject({ name: 'NoSuchKey', status: 404 });
  });

  it('lists by prefix, a page at a time', async () => {
    const wanted = Array.from({ length: 5 }, (_, i) => `list/a/${i}.txt`);
    for (const key of [...wanted, 'list/b/0.txt', 'list/a.txt']) await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: key }));
    const pages: string[][] = [];
    let token: string | undefined;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'list/a/', MaxKeys: 2, ContinuationToken: token }));
      pages.push((page.Contents ?? []).map((o) => o.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    expect(pages).toEqual([wanted.slice(0, 2), wanted.slice(2, 4), wanted.slice(4)]);
  });

  it('uploads a large object in parts and reads it back whole', { timeout: 120_000 }, async () => {
    const key = 'shards/large.bin';
    // Four 5 MiB parts (the smallest s3api takes but the last) and a short fifth.
    const body = randomBytes(21_000_000);
    const upload = new Upload({ client: s3, params: { Bucket: BUCKET, Key: key, Body: body }, partSize: 5 * 1024 * 1024, queueSize: 2 });
    const done = await upload.done();
    expect(done.ETag).toMatch(/-5"$/); // a multipart object's ETag counts its parts
    expect((await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }))).ContentLength).toBe(body.length);
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    expect(sha256(await got.Body!.transformToByteArray())).toBe(sha256(body));
  });

  it.each([
    ['If-None-Match: *', { IfNoneMatch: '*' }],
    ['If-Match', { IfMatch: '"d41d8cd98f00b204e9800998ecf8427e"' }],
  ])('refuses a conditional write (%s) and leaves the object as it was', async (_, condition) => {
    const key = 'conditional.txt';
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: 'first' }));
    const refused = await failure(s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: 'second', ...condition })));
    expect(refused).toMatchObject({ name: 'NotImplemented', status: 501, attempts: 1 });
    expect(await (await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))).Body!.transformToString()).toBe('first');
  });

  it("refuses the SDK's default streaming checksums, and takes the same stream with WHEN_REQUIRED", async () => {
    const stream = (): Readable => Readable.from([Buffer.from('streamed ')], { objectMode: false });
    const defaults = client({ requestChecksumCalculation: undefined, responseChecksumValidation: undefined });
    try {
      const refused = await failure(defaults.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'streamed.txt', Body: stream(), ContentLength: 9 })));
      expect(refused).toMatchObject({ name: 'NotImplemented', status: 501 });
    } finally {
      defaults.destroy();
    }
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'streamed.txt', Body: stream(), ContentLength: 9 }));
    expect(await (await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'streamed.txt' }))).Body!.transformToString()).toBe('streamed ');
  });
});

describe('the proxy down or hung', () => {
  const key = 'fault.txt';
  beforeAll(async () => {
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: 'still here' }));
  });

  it('a stopped proxy refuses connections at once; the same client works once it is back', async () => {
    await swift.stopProxy();
    try {
      const refused = await failure(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key })));
      // A plain Node.js error, retried by the SDK's standard mode (3 attempts) with short backoffs.
      expect(refused).toMatchObject({ name: 'Error', code: 'ECONNREFUSED', status: undefined, attempts: 3 });
      expect(refused.ms).toBeLessThan(2_000);
    } finally {
      await swift.startProxy();
    }
    // Its pooled connections died with the old proxy; the client connects again by itself.
    expect((await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }))).ContentLength).toBe(10);
  });

  it('a hung proxy fails a request after requestTimeout, only with throwOnRequestTimeout', async () => {
    // Without throwOnRequestTimeout the handler only logs a warning and the request waits forever;
    // connectionTimeout does not help, as the kernel accepts the connection for the frozen proxy.
    const bounded = client({ requestHandler: { connectionTimeout: 500, requestTimeout: 1_000, throwOnRequestTimeout: true }, maxAttempts: 1 });
    try {
      swift.pauseProxy();
      let timedOut: Awaited<ReturnType<typeof failure>>;
      try {
        timedOut = await failure(bounded.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key })));
      } finally {
        swift.resumeProxy();
      }
      expect(timedOut).toMatchObject({ name: 'TimeoutError', code: 'ETIMEDOUT', attempts: 1 });
      expect(timedOut.ms).toBeGreaterThanOrEqual(900);
      expect(timedOut.ms).toBeLessThan(3_000);
      expect((await bounded.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }))).ContentLength).toBe(10);
    } finally {
      bounded.destroy();
    }
  });

  it('a per-request abort signal bounds a request too, whatever the client was made with', async () => {
    swift.pauseProxy();
    let aborted: Awaited<ReturnType<typeof failure>>;
    try {
      aborted = await failure(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }), { abortSignal: AbortSignal.timeout(1_000) }));
    } finally {
      swift.resumeProxy();
    }
    expect(aborted).toMatchObject({ name: 'AbortError', attempts: 1 });
    expect(aborted.ms).toBeLessThan(3_000);
    expect((await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }))).ContentLength).toBe(10);
  });
});
