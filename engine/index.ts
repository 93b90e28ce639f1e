/**
 * The engine: per-workspace shards (format in shard-format.ts) and the four read tools. It
 * knows nothing of HTTP, PostgreSQL or the ingest queue. This file only re-exports.
 */

export { FORMAT_VERSION, type DocMeta, type ShardState } from './shard-format.js';
export { closeReadersEverywhere, closeShardReader, followReaderCloses, openLmdbReader, openReaderCount, openShardReader } from './reader-cache.js';
export { DEFAULT_OPEN_SHARDS, setReaderLimits, ShardReader, type ReaderLimits, type ShardSource } from './shard-reader.js';
export { ShardSnapshot } from './shard-snapshot.js';
export { openShardWriter, ShardWriter, type DocInput, type BatchResult, type CompactResult } from './shard-writer.js';
export { Visibility, type Claims, viewOf } from './visibility.js';
export { HEARTBEAT, CHUNK_BYTES, MAX_LINE_CHARS, recycleChunk, sharesMemory, type GrepStats, type ToolSummary } from './tool-output.js';
export { ls, listDirectory, MAX_LS_ENTRIES, type LsRequest, type DirEntry } from './tool-ls.js';
export { find, type FindRequest } from './tool-find.js';
export { DEFAULT_FIND_LIMIT, MAX_FIND_LIMIT } from '../core/read-limits.js';
export { cat, DEFAULT_CAT_LIMIT, MAX_CAT_BYTES, type CatRequest } from './tool-cat.js';
export {
  grep,
  grepWithDefaults,
  collectGrepCounts,
  emitGrepCounts,
  grepContentFooter,
  type GrepContentSummary,
  type GrepPathRange,
  type GrepLead,
  type GrepSplit,
  type GrepCandidateIds,
  type GrepShare,
  type GrepRequest,
  type GrepSettings,
  type GrepOutputMode,
  type GrepFileCount,
  type GrepCollection,
} from './tool-grep.js';
export { FILE_TYPES } from './file-types.js';
export { setV8Scans } from './guarded-scan.js';
