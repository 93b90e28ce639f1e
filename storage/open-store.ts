/** The object store the configuration names (Config.storage), made in whichever thread needs it. */
import { LocalObjectStore } from './local-store.js';
import type { ObjectStore } from './object-store.js';
import { S3ObjectStore, type S3Settings } from './s3-store.js';

/** Where originals are kept: a local directory (`npm start`'s default, the data directory) or an S3 bucket. */
export type StorageSettings = { kind: 'local'; root: string } | ({ kind: 's3' } & S3Settings);

/** Makes the store `settings` name (plain data, so that a worker thread can make its own). */
export function openObjectStore(settings: StorageSettings): ObjectStore {
  return settings.kind === 'local' ? new LocalObjectStore(settings.root) : new S3ObjectStore(settings);
}
