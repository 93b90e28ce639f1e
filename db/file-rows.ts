/**
 * A file's row as the ingest loop and the shard copies read it: the columns they select
 * (FILE_ROW_COLUMNS) and the mapping to a JobFile. Shared by the ingest queue
 * (ingest-jobs.ts) and the change log (changes.ts), which each read files rows.
 */

/** The file a job is for, as it stands now. */
export interface JobFile {
  workspaceId: string;
  path: string;
  generation: number;
  blobSha256: string;
  contentType: string;
  visibility: string[] | null;
  sizeBytes: number;
  updatedAt: number;
  /** True when the file's text is its original byte for byte (nothing kept beside it); false or null: a kept text. */
  textIsOriginal: boolean | null;
}

/** The columns of a file row that make a JobFile (fileRow), as a query names them on `files f`. */
export const FILE_ROW_COLUMNS =
  'f.workspace_id, f.path, f.generation, f.blob_sha256, f.content_type, f.visibility, f.size_bytes, f.updated_at, f.text_is_original';

/** A file row as FILE_ROW_COLUMNS selects it. */
export interface FileRow {
  workspace_id: string;
  path: string;
  generation: string;
  blob_sha256: string;
  content_type: string;
  visibility: string[] | null;
  size_bytes: string;
  updated_at: Date;
  text_is_original: boolean | null;
}

/** A file row as the ingest and the shard copies use it. */
export function fileRow(r: FileRow): JobFile {
  return {
    workspaceId: r.workspace_id,
    path: r.path,
    generation: Number(r.generation),
    blobSha256: r.blob_sha256,
    contentType: r.content_type,
    visibility: r.visibility,
    sizeBytes: Number(r.size_bytes),
    updatedAt: r.updated_at.getTime(),
    textIsOriginal: r.text_is_original,
  };
}
