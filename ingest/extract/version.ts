/**
 * The version of what extraction makes of a file. Texts are kept in the object store under it
 * (ingest/blob-store.ts), so it must change whenever any extractor's output for the same bytes would:
 * every text is then extracted again, and the old ones swept.
 */
export const EXTRACTOR_VERSION = 1;
