/**
 * Reads the entries of a zip-based document (Office Open XML, OpenDocument, EPUB) under limits,
 * so that an archive built to explode (a zip bomb, a million entries, an entry that inflates
 * past what its header says) fails with the limit it hit instead of exhausting the extractor.
 *
 * The central directory is listed first without inflating anything (fflate's `unzipSync` with
 * a filter that takes nothing): the entry count, the declared sizes and each entry's declared
 * ratio are checked there. Then only the entries a caller asks for are inflated, by fflate's
 * streaming reader, counting the bytes as they come: an entry that inflates past its declared
 * size, or the whole past `maxTotalBytes`, stops at once.
 */
import { Unzip, UnzipInflate, unzipSync } from 'fflate';

/** Limits on one archive. */
export interface ZipLimits {
  /** Entries in the central directory at most. */
  maxEntries: number;
  /** Uncompressed bytes read from the archive at most, over every entry read. */
  maxTotalBytes: number;
  /** Uncompressed size over compressed size at most, for an entry of more than 1 MiB. */
  maxRatio: number;
}

export const DEFAULT_ZIP_LIMITS: Readonly<ZipLimits> = Object.freeze({ maxEntries: 10_000, maxTotalBytes: 256 * 1024 * 1024, maxRatio: 1000 });

/** An entry below this size is not held to the ratio: small XML parts compress far better than documents do. */
const RATIO_FLOOR = 1024 * 1024;

/** A refusal: the archive broke a limit or is not a readable zip. Its message is the file's `errorDetail`. */
export class ArchiveError extends Error {}

/** One entry of the central directory. */
export interface ZipEntry {
  name: string;
  /** Declared uncompressed size. */
  size: number;
}

/** A zip archive's directory, and its entries read on demand under the limits. */
export class ZipReader {
  readonly entries: ReadonlyMap<string, ZipEntry>;
  private readBytes = 0;

  constructor(
    private readonly data: Uint8Array,
    private readonly limits: ZipLimits = DEFAULT_ZIP_LIMITS,
  ) {
    const entries = new Map<string, ZipEntry>();
    try {
      unzipSync(data, {
        filter: (file) => {
          if (entries.size >= limits.maxEntries) throw new ArchiveError(`more than ${limits.maxEntries} entries`);
          if (file.originalSize > RATIO_FLOOR && file.originalSize > file.size * limits.maxRatio) {
            throw new ArchiveError(
              `entry ${quoteName(file.name)} would inflate ${Math.round(file.originalSize / Math.max(1, file.size))} times, over the limit of ${limits.maxRatio}`,
            );
          }
          if (file.originalSize > limits.maxTotalBytes) {
            throw new ArchiveError(`entry ${quoteName(file.name)} would inflate to ${file.originalSize} bytes, over the limit of ${limits.maxTotalBytes}`);
          }
          entries.set(file.name, { name: file.name, size: file.originalSize });
          return false;
        },
      });
    } catch (error) {
      if (error instanceof ArchiveError) throw error;
      throw new ArchiveError(`not a readable ZIP archive (${error instanceof Error ? error.message : String(error)}); the file may be truncated`);
    }
    this.entries = entries;
  }

  /** True when the archive has an entry of this name. */
  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** The names that match `test`, in directory order. */
  names(test: (name: string) => boolean): string[] {
    return [...this.entries.keys()].filter(test);
  }

  /** The entries named, inflated (each as its declared size at most); a name the archive lacks is left out. */
  read(names: readonly string[]): Map<string, Buffer> {
    const wanted = new Set(names.filter((n) => this.entries.has(n)));
    const out = new Map<string, Buffer>();
    if (wanted.size === 0) return out;
    const limits = this.limits;
    let failure: Error | null = null;
    const unzip = new Unzip((file) => {
      if (!wanted.has(file.name) || failure !== null) return;
      const declared = this.entries.get(file.name)!.size;
      const chunks: Uint8Array[] = [];
      let size = 0;
      file.ondata = (error, chunk, final) => {
        if (failure !== null) return;
        if (error !== null) {
          failure = new ArchiveError(`entry ${quoteName(file.name)} cannot be inflated (${error.message}); the file may be damaged`);
          return;
        }
        size += chunk.length;
        this.readBytes += chunk.length;
        if (size > declared) {
          failure = new ArchiveError(`entry ${quoteName(file.name)} inflates past its declared size of ${declared} bytes`);
        } else if (this.readBytes > limits.maxTotalBytes) {
          failure = new ArchiveError(`its entries inflate to more than ${limits.maxTotalBytes} bytes, the limit`);
        }
        if (failure !== null) {
          file.terminate();
          return;
        }
        chunks.push(chunk);
        if (final) out.set(file.name, Buffer.concat(chunks, size));
      };
      file.start();
    });
    unzip.register(UnzipInflate);
    try {
      unzip.push(this.data, true);
    } catch (error) {
      failure ??= new ArchiveError(`not a readable ZIP archive (${error instanceof Error ? error.message : String(error)}); the file may be truncated`);
    }
    if (failure !== null) throw failure;
    for (const name of wanted) {
      if (!out.has(name)) throw new ArchiveError(`entry ${quoteName(name)} could not be read; the file may be truncated`);
    }
    return out;
  }

  /** One entry as UTF-8 text, or null when the archive lacks it. */
  text(name: string): string | null {
    return this.read([name]).get(name)?.toString('utf8') ?? null;
  }
}

function quoteName(name: string): string {
  return JSON.stringify(name.length > 100 ? name.slice(0, 100) + '…' : name);
}
