/**
 * The object store on an S3-compatible bucket (AWS S3, R2, MinIO, Ceph, Swift's S3 API), through
 * the AWS SDK: `@aws-sdk/client-s3` for requests, `@aws-sdk/lib-storage` for multipart uploads
 * of large files. No conditional write is used (Swift's S3 API has none): keys are immutable and
 * PostgreSQL arbitrates the rest.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { LocalCopy, ObjectStore, StoredObject } from './object-store.js';

/** How to reach the bucket (Config.storage). */
export interface S3Settings {
  bucket: string;
  /** Key prefix, empty or ending in `/`. */
  prefix: string;
  /** The endpoint of a non-AWS store; null: AWS's for the region. */
  endpoint: string | null;
  region: string;
  /** Static credentials; null: the SDK's default chain (instance role, profile…). */
  credentials: { accessKeyId: string; secretAccessKey: string } | null;
  /** `bucket` in the path rather than the host name (most non-AWS stores want it). */
  pathStyle: boolean;
  /** Longest a request may wait for the store's next bytes before it fails. */
  timeoutMs: number;
}

/** Keys in one DeleteObjects request: S3's most. */
const DELETE_BATCH = 1000;
/** Parts of a multipart upload: the smallest S3 takes (but the last). */
const PART_BYTES = 8 * 1024 * 1024;

/** Objects in an S3 bucket under a prefix. */
export class S3ObjectStore implements ObjectStore {
  readonly location: string;
  private readonly client: S3Client;

  constructor(private readonly settings: S3Settings) {
    this.location = `s3://${settings.bucket}/${settings.prefix}${settings.endpoint === null ? '' : ` at ${settings.endpoint}`}`;
    this.client = new S3Client({
      region: settings.region,
      ...(settings.endpoint === null ? {} : { endpoint: settings.endpoint }),
      ...(settings.credentials === null ? {} : { credentials: settings.credentials }),
      forcePathStyle: settings.pathStyle,
      // Checksums only where the API requires them: stores such as Swift's S3 API before 2.35.1
      // refuse the SDK's default streaming (aws-chunked) checksums.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // A store that is down or hung fails within about two timeouts; the caller answers 503 and
      // commits nothing. Without throwOnRequestTimeout a hung store (connection accepted, nothing
      // answered) only logs a warning and the request waits forever.
      maxAttempts: 2,
      requestHandler: { connectionTimeout: Math.min(5000, settings.timeoutMs), requestTimeout: settings.timeoutMs, throwOnRequestTimeout: true },
    });
  }

  async init(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.settings.bucket }));
    } catch (error) {
      if (!(error instanceof S3ServiceException) || error.$metadata.httpStatusCode !== 404) throw error;
      await this.client.send(new CreateBucketCommand({ Bucket: this.settings.bucket }));
    }
  }

  async putFile(key: string, file: string): Promise<void> {
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.settings.bucket, Key: this.key(key), Body: createReadStream(file) },
      partSize: PART_BYTES,
      queueSize: 2,
    });
    await upload.done();
    await unlink(file);
  }

  async put(key: string, bytes: Buffer): Promise<void> {
    await this.client.send(new PutObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key), Body: bytes }));
  }

  async read(key: string): Promise<Buffer | null> {
    const body = await this.body(key);
    return body === null ? null : Buffer.from(await body.transformToByteArray());
  }

  async readRange(key: string, offset: number, length: number): Promise<Buffer | null> {
    // No byte range is empty (S3 answers `bytes=5-4` with the whole object): an empty part (an
    // empty file's, in a pack) only needs its object to be there.
    if (length === 0) return (await this.exists(key)) ? Buffer.alloc(0) : null;
    const body = await this.body(key, `bytes=${offset}-${offset + length - 1}`);
    if (body === null) return null;
    const bytes = Buffer.from(await body.transformToByteArray());
    if (bytes.length !== length) throw new Error(`${key}: ${bytes.length} bytes where ${length} were asked from byte ${offset}`);
    return bytes;
  }

  async getFile(key: string, scratchDir: string): Promise<LocalCopy | null> {
    const body = await this.body(key);
    if (body === null) return null;
    await mkdir(scratchDir, { recursive: true });
    const path = join(scratchDir, randomBytes(12).toString('hex'));
    try {
      await pipeline(body as Readable, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
    return { path, temporary: true, release: () => rm(path, { force: true }) };
  }

  /** Whether there is an object under `key`. */
  private async exists(key: string): Promise<boolean> {
    return (await orAbsent(this.client.send(new HeadObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key) })))) !== null;
  }

  /** The body of the object under `key` (of its `range` when given), or null when there is none. */
  private async body(key: string, range?: string): Promise<NonNullable<GetObjectCommandOutput['Body']> | null> {
    const reply = await orAbsent(this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key), Range: range })));
    return reply === null ? null : reply.Body!;
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key) }));
  }

  async deleteMany(keys: readonly string[]): Promise<void> {
    for (let at = 0; at < keys.length; at += DELETE_BATCH) {
      const command = new DeleteObjectsCommand({
        Bucket: this.settings.bucket,
        Delete: { Objects: keys.slice(at, at + DELETE_BATCH).map((key) => ({ Key: this.key(key) })), Quiet: true },
      });
      // S3 requires an integrity header on this request; the SDK sends a CRC32, which Swift's S3
      // API before 2.35 does not know: it asks for Content-MD5 (AWS takes either).
      command.middlewareStack.add(
        (next) => async (args) => {
          const request = args.request as { headers: Record<string, string>; body: string };
          request.headers['content-md5'] = createHash('md5').update(request.body).digest('base64');
          return next(args);
        },
        { step: 'finalizeRequest', name: 'contentMd5' },
      );
      const reply = await this.client.send(command);
      const failed = reply.Errors?.[0];
      if (failed !== undefined) throw new Error(`deleting ${failed.Key} failed: ${failed.Code} ${failed.Message}`);
    }
  }

  async *list(prefix: string): AsyncIterable<StoredObject> {
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.settings.bucket, Prefix: this.key(prefix), ContinuationToken: token }));
      for (const object of page.Contents ?? []) {
        if (object.Key === undefined) continue;
        yield { key: object.Key.slice(this.settings.prefix.length), lastModified: object.LastModified ?? new Date(0) };
      }
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }

  close(): void {
    this.client.destroy();
  }

  private key(key: string): string {
    return this.settings.prefix + key;
  }
}

/** The reply to a request about one object, or null when the store answered 404 (no such object). */
async function orAbsent<T>(request: Promise<T>): Promise<T | null> {
  try {
    return await request;
  } catch (error) {
    if (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404) return null;
    throw error;
  }
}
